// A first start without waiting (CudnnEngineOptions::quick: what needs no timing or compiling) and the compiled
// graph plans kept beside the algorithm cache (plan_cache.hpp): every start gives the CPU's logits, a quick start
// after a tuned one runs the tuned choices from the caches without compiling, and plans of another machine or
// damaged ones are compiled again rather than used; plans compiled on several threads at once run as those compiled one
// after the other.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"
#include "inference/model/resnet.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::inference;
using vc::test::relative_error;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("gpu.cold_start");

namespace {

std::vector<fs::path> kept_plans(const fs::path& folder) {
  std::vector<fs::path> out;
  if (!fs::exists(folder)) return out;
  for (const auto& e : fs::directory_iterator(folder)) {
    if (e.path().extension() == ".plan") out.push_back(e.path());
  }
  return out;
}

int graph_layers(const EngineReport& r) {
  int n = 0;
  for (const auto& c : r.convs) n += c.api == "graph";
  return n;
}

}  // namespace

TEST_CASE("a quick start classifies at once; a tuned start keeps its compiled plans; the next quick start runs them") {
  const auto net = random_resnet(named_resnet("resnet50", 1000), 11);
  const int batch = 4, size = 224;
  const size_t image = size_t(size) * size * 3;
  const auto input = vc::test::random_fp16_input(image * size_t(batch));
  const std::vector<float> first_image(input.value.begin(), input.value.begin() + std::ptrdiff_t(image));
  const auto want = CpuEngine(net, 0).forward(first_image, 1, size, size);
  const auto image0 = [&](const std::vector<float>& logits) {
    return std::vector<float>(logits.begin(), logits.begin() + net.num_classes);
  };
  const auto dir = fs::temp_directory_path() / "vc-gpu-test-cold-start";
  fs::remove_all(dir);
  CudnnEngineOptions o;
  o.batch = batch;
  o.cache_path = (dir / "algorithms.json").string();
  const auto plans = dir / "algorithms.plans";

  // Empty caches: nothing timed or compiled, every convolution on cuDNN's heuristic choice until tuned.
  o.quick = true;
  std::vector<float> quick_logits;
  {
    CudnnEngine quick(net, size, size, o);
    const auto& r = quick.report();
    MESSAGE("quick start, empty caches: set-up " << r.setup_seconds << " s, " << r.untuned_layers << " of "
                                                 << r.convs.size() << " convolutions untuned");
    CHECK(r.untuned_layers == int(r.convs.size()));
    CHECK(r.plans_compiled == 0);
    CHECK(r.cache_misses == 0);
    CHECK(!fs::exists(o.cache_path));  // (nothing saved)
    quick_logits = quick.run(input.fp16.data());
    CHECK(relative_error(image0(quick_logits), want) <= 1e-2);
  }

  // The tuned start: tunes, compiles, and keeps the compiled plans of the graph-API layers it chose.
  o.quick = false;
  std::vector<float> tuned_logits;
  EngineReport tuned_report;
  {
    CudnnEngine tuned(net, size, size, o);
    tuned_report = tuned.report();
    MESSAGE("tuned start: set-up " << tuned_report.setup_seconds << " s (" << tuned_report.plan_build_seconds
                                   << " s compiling), " << graph_layers(tuned_report) << " graph-API layers, "
                                   << kept_plans(plans).size() << " compiled plans kept");
    CHECK(tuned_report.untuned_layers == 0);
    REQUIRE(graph_layers(tuned_report) > 0);
    REQUIRE(!kept_plans(plans).empty());
    tuned_logits = tuned.run(input.fp16.data());
    CHECK(relative_error(image0(tuned_logits), want) <= 1e-2);
  }

  // The next quick start: the tuned choices, the kept plans loaded, nothing compiled.
  o.quick = true;
  {
    CudnnEngine again(net, size, size, o);
    const auto& r = again.report();
    MESSAGE("quick start after it: set-up " << r.setup_seconds << " s, " << r.plans_loaded << " plans loaded, "
                                            << r.plans_compiled << " compiled");
    CHECK(r.untuned_layers == 0);
    CHECK(r.plans_compiled == 0);
    CHECK(r.plans_loaded > 0);
    REQUIRE(r.convs.size() == tuned_report.convs.size());
    for (size_t i = 0; i < r.convs.size(); ++i) {
      CAPTURE(r.convs[i].layer);
      CHECK(r.convs[i].api == tuned_report.convs[i].api);
      CHECK(r.convs[i].algorithm == tuned_report.convs[i].algorithm);
    }
    const auto logits = again.run(input.fp16.data());
    CHECK(relative_error(image0(logits), want) <= 1e-2);
    CHECK(relative_error(logits, tuned_logits) <= 1e-3);
  }

  // Plans compiled elsewhere (another GPU, driver or cuDNN) are not used: the layers that need them start untuned.
  {
    std::ofstream(plans / "machine.json") << R"({"machine": "another GPU | driver 1.0 | cuDNN 1"})" << "\n";
    CudnnEngine elsewhere(net, size, size, o);
    CHECK(elsewhere.report().plans_loaded == 0);
    CHECK(elsewhere.report().plans_compiled == 0);
    CHECK(elsewhere.report().untuned_layers > 0);
    CHECK(relative_error(image0(elsewhere.run(input.fp16.data())), want) <= 1e-2);
  }
  // A tuned start puts this machine's plans back; damaged plans are then compiled again, not used.
  o.quick = false;
  { CudnnEngine tuned(net, size, size, o); }
  for (const auto& p : kept_plans(plans)) {
    std::ifstream in(p, std::ios::binary);
    std::string key;
    std::getline(in, key);
    in.close();
    std::ofstream(p, std::ios::binary | std::ios::trunc) << key << "\n" << "not a plan at all";
  }
  {
    CudnnEngine damaged(net, size, size, o);
    CHECK(damaged.report().plans_loaded == 0);
    CHECK(damaged.report().plans_compiled > 0);
    CHECK(relative_error(image0(damaged.run(input.fp16.data())), want) <= 1e-2);
  }
  fs::remove_all(dir);
}

TEST_CASE("graph plans compiled on several threads at once run as those compiled one after the other") {
  const auto net = random_resnet(named_resnet("resnet50", 1000), 12);
  const int batch = 2, size = 224;
  const size_t image = size_t(size) * size * 3;
  const auto input = vc::test::random_fp16_input(image * size_t(batch));
  const std::vector<float> first_image(input.value.begin(), input.value.begin() + std::ptrdiff_t(image));
  const auto want = CpuEngine(net, 0).forward(first_image, 1, size, size);
  const auto dir = fs::temp_directory_path() / "vc-gpu-test-compile-beside";
  std::vector<float> logits[2];
  double seconds[2] = {};
  int compiled[2] = {};
  for (const int threads : {1, 8}) {  // (empty caches each time: every plan compiled)
    fs::remove_all(dir);
    CudnnEngineOptions o;
    o.batch = batch;
    o.cache_path = (dir / "algorithms.json").string();
    o.compile_threads = threads;
    CudnnEngine engine(net, size, size, o);
    const auto& r = engine.report();
    const int k = threads > 1;
    MESSAGE(threads << " thread(s): set-up " << r.setup_seconds << " s, " << r.plans_compiled << " plans compiled in "
                    << r.plan_build_seconds << " s, " << graph_layers(r) << " graph-API layers");
    CHECK(r.compile_threads == threads);
    CHECK(r.plans_compiled > 0);
    REQUIRE(graph_layers(r) > 0);
    REQUIRE(!kept_plans(dir / "algorithms.plans").empty());  // (adopted plans are kept as built ones are)
    logits[k] = engine.run(input.fp16.data());
    CHECK(relative_error(std::vector<float>(logits[k].begin(), logits[k].begin() + net.num_classes), want) <= 1e-2);
    seconds[k] = r.plan_build_seconds;
    compiled[k] = r.plans_compiled;
  }
  MESSAGE("compiling: " << seconds[0] << " s one after the other (" << compiled[0] << " plans), " << seconds[1]
                        << " s on 8 threads (" << compiled[1] << " plans, every candidate of every shape)");
  CHECK(relative_error(logits[1], logits[0]) <= 1e-2);
  fs::remove_all(dir);
}

TEST_SUITE_END();
