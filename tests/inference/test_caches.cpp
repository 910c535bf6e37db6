// The GPU engine's caches as files, on the CPU: the algorithm cache and the compiled plans kept beside it
// (algo_cache.hpp, plan_cache.hpp) — what a later start reads back, and what it must not use.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "inference/cuda/engine/algo_cache.hpp"
#include "inference/cuda/engine/plan_cache.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::inference;
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("caches");

TEST_CASE("compiled plans are found by their key on the machine that kept them, and nowhere else") {
  const auto dir = fs::path(vc::test::path("plan-cache"));
  fs::remove_all(dir);
  const auto algorithms = (dir / "algorithms.json").string();
  const std::vector<uint8_t> plan{0, 1, '\n', 255, 7};  // (any bytes: a newline inside too)
  {
    PlanCache kept(algorithms, "GPU A | driver 1 | cuDNN 9");
    CHECK(!kept.find("shape|plan3"));  // nothing kept yet
    kept.put("shape|plan3", plan);
    kept.put("shape|plan4", {});  // (an empty plan: nothing cuDNN could serialize, nothing kept)
  }
  CHECK(fs::exists(dir / "algorithms.plans" / "machine.json"));
  PlanCache same(algorithms, "GPU A | driver 1 | cuDNN 9");
  REQUIRE(same.find("shape|plan3"));
  CHECK(*same.find("shape|plan3") == plan);
  CHECK(!same.find("shape|plan4"));
  CHECK(!same.find("shape|plan5"));
  // Another GPU, driver or cuDNN: not used; the first plan it keeps replaces the other machine's.
  PlanCache other(algorithms, "GPU B | driver 1 | cuDNN 9");
  CHECK(!other.find("shape|plan3"));
  other.put("shape|plan6", plan);
  CHECK(!PlanCache(algorithms, "GPU A | driver 1 | cuDNN 9").find("shape|plan3"));
  CHECK(PlanCache(algorithms, "GPU B | driver 1 | cuDNN 9").find("shape|plan6"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir / "algorithms.plans")) files += e.path().extension() == ".plan";
  CHECK(files == 1);
  // A file whose first line is another key (a hash shared, or a damaged file) is not that key's plan.
  for (const auto& e : fs::directory_iterator(dir / "algorithms.plans")) {
    if (e.path().extension() == ".plan") std::ofstream(e.path(), std::ios::binary) << "shape|plan7\nxyz";
  }
  CHECK(!PlanCache(algorithms, "GPU B | driver 1 | cuDNN 9").find("shape|plan6"));
  // No algorithm cache: nothing kept.
  PlanCache none("", "GPU A");
  none.put("shape|plan3", plan);
  CHECK(!none.find("shape|plan3"));
  fs::remove_all(dir);
}

TEST_CASE("the algorithm cache is written whole and read back; no temporary file is left") {
  const auto dir = fs::path(vc::test::path("algo-cache"));
  fs::remove_all(dir);
  const auto file = (dir / "sub" / "algorithms.json").string();
  {
    AlgoCache cache(file);
    cache.put("layer|a", {3, 1, true, 64, 0.25f});
    cache.save();
  }
  const auto hit = AlgoCache(file).find("layer|a");
  REQUIRE(hit);
  CHECK(hit->algorithm == 3);
  CHECK(hit->math == 1);
  CHECK(hit->graph);
  CHECK(hit->workspace == 64);
  CHECK(hit->ms == doctest::Approx(0.25));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "sub")) ++entries;
  CHECK(entries == 1);
  fs::remove_all(dir);
}

TEST_SUITE_END();
