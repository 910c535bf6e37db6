// bench: latency and throughput of the cuDNN engine per model and batch, start-up cold and with the algorithm
// cache, GPU memory, the preprocessing kernel, the stem alone (our fused kernel vs cuDNN FP32 and TF32) and the
// head alone (pool + classifier, separate vs fused). Prints tables and writes JSON. Random weights (timing does
// not depend on their values). Runs on a GPU; `--cpu` times the CPU reference engine instead; `--only stem` (or
// preprocess, head, engine, comma-separated) runs only those sections.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/percentile.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"
#include "inference/cuda/engine/engine_kernels.hpp"
#include "inference/cuda/engine/gpu_timer.hpp"
#include "inference/cuda/engine/stem_kernel.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "inference/cuda/preprocess_gpu.hpp"
#include "inference/model/half.hpp"
#include "inference/model/resnet.hpp"

using namespace vc::inference;
using json = nlohmann::json;

namespace {

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}
std::vector<std::string> parse_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// Median milliseconds per call of `fn` (enqueued on `stream`): calls per loop calibrated so that one loop lasts
// about target_loop_ms.
template <typename Fn>
double time_gpu(cudaStream_t stream, Fn fn, int warmup, int loops, double target_loop_ms = 50) {
  const double one = median_gpu_ms(stream, fn, warmup, 1);
  const int reps = std::clamp(int(target_loop_ms / std::max(one, 0.001)), 1, 2000);
  return median_gpu_ms(stream, fn, 0, loops, reps);
}

json bench_preprocess(int loops) {
  CudaStream stream = make_stream();
  const int w = 1920, h = 1080;
  std::vector<uint8_t> frame(packed_frame_bytes(PixelFormat::NV12, w, h));
  std::mt19937 rng(1);
  for (auto& b : frame) b = uint8_t(rng());
  DeviceBuffer<uint8_t> dev(frame.size());
  copy_to_device(dev.get(), frame.data(), frame.size());
  const auto host_view = packed_frame_view(PixelFormat::NV12, w, h, frame.data());
  auto dev_view = packed_frame_view(PixelFormat::NV12, w, h, dev.get());
  dev_view.memory = MemoryKind::Device;
  PreprocessParams p;
  p.size = 224;
  DeviceBuffer<__half> out(224 * 224 * 3);
  GpuFrameDesc desc{dev_view, resize_geometry(w, h, p)};
  DeviceBuffer<GpuFrameDesc> ddesc(1);
  copy_to_device(ddesc.get(), &desc, sizeof desc);
  const double kernel_ms = time_gpu(stream, [&] { launch_preprocess(ddesc.get(), 1, PixelFormat::NV12, p, out.get(), stream); }, 50, loops);
  GpuPreprocessor pre(p, 1, stream, 1, frame.size());
  const double device_ms = time_gpu(stream, [&] { pre.run(std::span(&dev_view, 1), out.get()); }, 20, loops, 20);
  const double host_ms = time_gpu(stream, [&] { pre.run(std::span(&host_view, 1), out.get()); }, 5, loops, 20);
  // A batch of 256 from GPU memory: 256 whole frames (64 streams' 4 frames) against 256 crops (64 frames x 4
  // regions of different sizes and places), one launch each.
  constexpr int kBatch = 256;
  std::vector<FrameView> whole(kBatch, dev_view), crops(kBatch, dev_view);
  for (int i = 0; i < kBatch; ++i) {
    const int q = i % 4;
    crops[size_t(i)].crop = {q % 2 ? w / 2 + 37 : 101, q / 2 ? h / 2 + 11 : 63, 640 - 80 * q, 360 - 40 * q};
  }
  GpuPreprocessor batch(p, kBatch, stream, 1, 0);
  DeviceBuffer<__half> batch_out(size_t(kBatch) * 224 * 224 * 3);
  const double whole_ms = time_gpu(stream, [&] { batch.run(whole, batch_out.get()); }, 5, loops, 20);
  const double crops_ms = time_gpu(stream, [&] { batch.run(crops, batch_out.get()); }, 5, loops, 20);
  return {{"frame", "1920x1080 NV12"}, {"output", "224x224x3 FP16"}, {"kernel_us", kernel_ms * 1000},
          {"device_frame_us", device_ms * 1000}, {"host_frame_us", host_ms * 1000},
          {"batch256_whole_us", whole_ms * 1000}, {"batch256_crops_us", crops_ms * 1000},
          {"crops_vs_whole", crops_ms / whole_ms}};
}

// The stem alone (ResNet-18's: conv 7x7/2 3 -> 64 + ReLU, max-pool 3x3/2) at size x size, FP16 in and out, as
// the engine runs it: our fused kernel; the strict cuDNN path (input to FP32, cuDNN FP32 FMA conv + bias + ReLU,
// max-pool to FP16); the TF32 cuDNN path. Timed step by step in engines that differ only in the stem (one
// algorithm cache: the same body). TFLOP/s count the conv's useful work (2 * 147 * 64 per conv pixel).
json bench_stem(int size, const std::vector<int>& batches, int loops) {
  const auto net = random_resnet(named_resnet("resnet18", 1000), 1);
  const Layer& conv = net.layers[0];
  const int ps = stem_pool_extent(size), cs = stem_conv_extent(size);
  const auto cache = (std::filesystem::temp_directory_path() / "vc-bench-stem-algos.json").string();
  std::filesystem::remove(cache);
  fmt::print("stem {0}x{0}: conv 7x7/2 {1}->{2} + ReLU + max-pool 3x3/2 -> {3}x{3}x{2} FP16; median ms, conv TFLOP/s\n",
             size, conv.in_channels, conv.out_channels, ps);
  fmt::print("{:>5} {:>10} {:>8} {:>11} {:>8} {:>9} {:>8} {:>9} {:>13}  {}\n", "batch", "fused ms", "TFLOP/s", "strict ms",
             "TFLOP/s", "tf32 ms", "TFLOP/s", "vs strict", "logits diff", "cuDNN stem algorithms (strict, tf32)");
  json rows = json::array();
  for (int batch : batches) {
    const double flop = 2.0 * kStemKernel * kStemKernel * conv.in_channels * conv.out_channels * cs * cs * batch;
    std::vector<uint16_t> input(size_t(batch) * size * size * conv.in_channels);
    std::mt19937 rng(batch);
    std::uniform_real_distribution<float> d(-2.f, 2.f);
    for (auto& v : input) v = float_to_half(d(rng));
    struct Path {
      double ms = 0;
      std::string stem, algorithm;
      std::vector<float> logits;
    };
    Path paths[3];  // fused, strict, TF32
    for (int p = 0; p < 3; ++p) {
      Path& path = paths[p];
      CudnnEngineOptions o;
      o.batch = batch;
      o.cache_path = cache;
      o.fused_stem = p == 0;
      o.tf32_stem = p == 2;
      o.cuda_graph = false;
      CudnnEngine engine(net, size, size, o);
      path.logits = engine.run(input.data());
      for (const auto& step : engine.time_steps(loops)) {
        if (step.layer <= 1) path.ms += step.ms;  // input to FP32, conv1, maxpool (or the fused step)
      }
      path.stem = engine.report().stem;
      const auto& c = engine.report().convs.front();
      if (c.layer == conv.name) path.algorithm = fmt::format("algo {} {}", c.algorithm, c.math);
    }
    const auto& [fused, strict, tf32] = paths;
    double num = 0, den = 0;
    for (size_t i = 0; i < strict.logits.size(); ++i) {
      num += (double(fused.logits[i]) - strict.logits[i]) * (double(fused.logits[i]) - strict.logits[i]);
      den += double(strict.logits[i]) * strict.logits[i];
    }
    const double logits_diff = std::sqrt(num / std::max(den, 1e-30));
    const auto tflops = [flop](double ms) { return ms > 0 ? flop / (ms * 1e9) : 0.0; };
    fmt::print("{:>5} {:>10.4f} {:>8.1f} {:>11.4f} {:>8.1f} {:>9.4f} {:>8.1f} {:>8.2f}x {:>13.2e}  {} / {}{}\n", batch,
               fused.ms, tflops(fused.ms), strict.ms, tflops(strict.ms), tf32.ms, tflops(tf32.ms), strict.ms / fused.ms,
               logits_diff, strict.algorithm, tf32.algorithm,
               fused.stem == kStemFused ? "" : "  (the fused kernel did not run: " + fused.stem + ")");
    std::fflush(stdout);
    rows.push_back({{"batch", batch}, {"size", size}, {"fused_ms", fused.ms}, {"fused_tflops", tflops(fused.ms)},
                    {"strict_ms", strict.ms}, {"strict_tflops", tflops(strict.ms)}, {"tf32_ms", tf32.ms},
                    {"tf32_tflops", tflops(tf32.ms)}, {"fused_stem", fused.stem}, {"strict_algo", strict.algorithm},
                    {"tf32_algo", tf32.algorithm}, {"logits_fused_vs_strict", logits_diff}});
  }
  std::filesystem::remove(cache);
  fmt::print("\n");
  return rows;
}

// Where the time goes: every step of ResNet-50's forward pass timed alone (CudnnEngine::time_steps), at batch 1
// and 256, with the API and algorithm each convolution runs on.
json bench_layers(const std::string& model, int size, const std::vector<int>& batches, int loops) {
  const auto net = random_resnet(named_resnet(model, 1000), 1);
  const auto cache = (std::filesystem::temp_directory_path() / "vc-bench-layer-algos.json").string();
  json out = json::array();
  for (int batch : batches) {
    CudnnEngineOptions o;
    o.batch = batch;
    o.cache_path = cache;
    o.cuda_graph = false;
    CudnnEngine engine(net, size, size, o);
    const auto steps = engine.time_steps(loops);
    double total = 0;
    for (const auto& st : steps) total += st.ms;
    fmt::print("{} at batch {}, {}x{}: {} steps, {:.3f} ms in all (each timed alone, no CUDA graph)\n", model, batch, size, size,
               steps.size(), total);
    fmt::print("  {:<28} {:>9} {:>6}  {}\n", "step", "ms", "share", "runs on");
    json rows = json::array();
    for (const auto& st : steps) {
      std::string how;
      for (const auto& c : engine.report().convs) {
        if (st.layer >= 0 && c.layer == net.layers[size_t(st.layer)].name) how = fmt::format("{} {} {}", c.api, c.algorithm, c.math);
      }
      fmt::print("  {:<28} {:>9.4f} {:>5.1f}%  {}\n", st.name, st.ms, 100 * st.ms / total, how);
      rows.push_back({{"step", st.name}, {"ms", st.ms}, {"runs_on", how}});
    }
    fmt::print("\n");
    out.push_back({{"model", model}, {"batch", batch}, {"total_ms", total}, {"steps", rows}});
  }
  std::filesystem::remove(cache);
  return out;
}

// The head alone (global average pool of 7x7 FP16 features + FP32 classifier to 1000 classes) as two kernels and
// as the fused one, for ResNet-18/34 (512 features) and ResNet-50+ (2048): the engine times the same choice.
json bench_head(const std::vector<int>& batches, int loops) {
  CudaStream stream = make_stream();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int hw = 49, classes = 1000;
  fmt::print("head: global average pool of 7x7 FP16 features + FP32 classifier to {} classes; median us\n", classes);
  fmt::print("{:>8} {:>5} {:>12} {:>10} {:>9}\n", "features", "batch", "separate us", "fused us", "speed-up");
  json rows = json::array();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int c : {512, 2048}) {
    std::vector<float> w(size_t(classes) * c), b(classes);
    for (auto& v : w) v = 0.05f * d(rng);
    for (auto& v : b) v = d(rng);
    DeviceBuffer<float> weight(w.size()), bias(b.size());
    copy_to_device(weight.get(), w.data(), weight.bytes());
    copy_to_device(bias.get(), b.data(), bias.bytes());
    for (int batch : batches) {
      std::vector<uint16_t> x(size_t(batch) * hw * c);
      for (auto& v : x) v = float_to_half(std::fabs(d(rng)));
      DeviceBuffer<__half> features(x.size());
      copy_to_device(features.get(), x.data(), features.bytes());
      DeviceBuffer<float> pooled(size_t(batch) * c), logits(size_t(batch) * classes);
      const double separate = time_gpu(stream, [&] {
        launch_global_avg_pool(features.get(), batch, hw, c, pooled.get(), stream);
        launch_fully_connected(pooled.get(), batch, c, weight.get(), bias.get(), classes, logits.get(), stream);
      }, 10, loops, 20);
      const double fused = time_gpu(stream, [&] {
        launch_pooled_classifier(features.get(), batch, hw, c, weight.get(), bias.get(), classes, logits.get(),
                                 prop.multiProcessorCount, stream);
      }, 10, loops, 20);
      fmt::print("{:>8} {:>5} {:>12.2f} {:>10.2f} {:>8.2f}x\n", c, batch, separate * 1000, fused * 1000, separate / fused);
      std::fflush(stdout);
      rows.push_back({{"features", c}, {"batch", batch}, {"classes", classes}, {"separate_us", separate * 1000},
                      {"fused_us", fused * 1000}});
    }
  }
  fmt::print("\n");
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench: cuDNN engine latency/throughput, start-up and memory; preprocessing"};
  std::string models = "resnet18,resnet34,resnet50,resnet101,resnet152", batches = "1,8,32,128,256", json_path = "bench.json";
  std::string only = "preprocess,stem,head,engine";
  int size = 224, loops = 7;
  bool cpu = false, tf32 = false, no_fused_stem = false;
  app.add_option("--models", models, "comma-separated architectures");
  app.add_option("--batches", batches, "comma-separated batch sizes");
  app.add_option("--size", size, "input size");
  app.add_option("--loops", loops, "timed loops (the median is reported)");
  app.add_option("--json", json_path, "where to write the results");
  app.add_flag("--tf32-stem", tf32, "allow TF32 in the stem");
  app.add_flag("--no-fused-stem", no_fused_stem, "engine: run the strict stem in cuDNN (FP32) instead of the fused kernel");
  app.add_option("--only", only, "comma-separated sections to run: preprocess, stem, head, engine");
  std::string head = "auto";
  app.add_option("--head", head, "engine: pool + classifier as 'separate' kernels, 'fused', or 'auto' (timed)")
      ->check(CLI::IsMember({"auto", "separate", "fused"}));
  std::string branches = "auto";
  app.add_option("--branches", branches,
                 "engine: downsample convolutions 'serial', 'concurrent' (beside the block's first conv) or 'auto' (timed)")
      ->check(CLI::IsMember({"auto", "serial", "concurrent"}));
  int max_plans = CudnnEngineOptions{}.max_graph_plans;
  app.add_option("--max-plans", max_plans, "engine: graph-API plans timed per layer")->check(CLI::Range(1, 1000));
  float tie_tolerance = CudnnEngineOptions{}.tie_tolerance;
  app.add_option("--tie-tolerance", tie_tolerance,
                 "engine: plans within this fraction of a layer's fastest are settled on the whole forward pass (0: off)")
      ->check(CLI::Range(0.f, 10.f));
  app.add_flag("--cpu", cpu, "time the CPU reference engine (batch 1) instead");
  CLI11_PARSE(app, argc, argv);
  vc::log::set_level("warn");
  const auto sections = parse_names(only);
  const auto wanted = [&](const char* name) { return std::find(sections.begin(), sections.end(), name) != sections.end(); };
  for (const auto& name : sections) {
    if (name != "preprocess" && name != "stem" && name != "head" && name != "engine" && name != "layers") {
      fmt::print(stderr, "bench: unknown section '{}' in --only (preprocess, stem, head, engine, layers)\n", name);
      return 64;
    }
  }

  json results = json::object();
  const auto gpu = probe_gpus();
  results["date"] = [] {
    const auto t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return std::string(buf);
  }();
  results["cudnn"] = cudnn_version_string(gpu.cudnn_loaded);
  results["driver"] = gpu.driver_version;

  if (cpu) {
    fmt::print("{:<12} {:>7} {:>12}\n", "model", "size", "CPU ms/img");
    for (const auto& m : parse_names(models)) {
      const CpuEngine engine(random_resnet(named_resnet(m, 1000), 1), 0);
      std::vector<float> input(size_t(size) * size * 3, 0.5f);
      (void)engine.forward(input, 1, size, size);
      std::vector<double> t;
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)engine.forward(input, 1, size, size);
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      const double median_ms = vc::bench::percentile(t, 0.5);
      fmt::print("{:<12} {:>7} {:>12.1f}\n", m, size, median_ms);
      results["cpu"].push_back({{"model", m}, {"size", size}, {"ms", median_ms}});
    }
    std::ofstream(json_path) << results.dump(2) << "\n";
    return 0;
  }
  if (gpu.devices.empty()) {
    fmt::print(stderr, "bench: no usable GPU ({})\n", gpu.cuda_error);
    return 69;
  }
  results["gpu"] = gpu.devices[0].name;

  try {
    if (wanted("preprocess")) {
      results["preprocess"] = bench_preprocess(loops);
      const auto& pp = results["preprocess"];
      fmt::print("preprocess 1920x1080 NV12 -> 224x224 FP16: kernel {:.1f} us, device frame {:.1f} us, host frame {:.1f} us\n",
                 pp["kernel_us"].get<double>(), pp["device_frame_us"].get<double>(), pp["host_frame_us"].get<double>());
      fmt::print("preprocess batch of 256 from GPU memory: 256 whole frames {:.1f} us, 256 crops (regions) {:.1f} us "
                 "({:.2f}x)\n\n", pp["batch256_whole_us"].get<double>(), pp["batch256_crops_us"].get<double>(),
                 pp["crops_vs_whole"].get<double>());
    }
    if (wanted("stem")) {
      results["stem"] = bench_stem(size, parse_ints(batches), loops);
      std::ofstream(json_path) << results.dump(2) << "\n";
    }
    if (wanted("head")) {
      results["head"] = bench_head(parse_ints(batches), loops);
      std::ofstream(json_path) << results.dump(2) << "\n";
    }
    if (wanted("layers")) {
      results["layers"] = bench_layers("resnet50", size, {1, 256}, loops);
      std::ofstream(json_path) << results.dump(2) << "\n";
    }
    if (!wanted("engine")) {
      std::ofstream(json_path) << results.dump(2) << "\n";
      fmt::print("wrote {}\n", json_path);
      return 0;
    }

    fmt::print("{:<10} {:>5} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9} {:>16} {}\n", "model", "batch", "ms", "img/s", "cold s",
               "cached s", "act MiB", "naive MiB", "GPU MiB", "graph-API layers", "stem / head / downsample branches");
    const auto cache = (std::filesystem::temp_directory_path() / "vc-bench-algos.json").string();
    for (const auto& m : parse_names(models)) {
      const auto net = random_resnet(named_resnet(m, 1000), 1);
      for (int batch : parse_ints(batches)) {
        std::filesystem::remove(cache);
        CudnnEngineOptions o;
        o.batch = batch;
        o.cache_path = cache;
        o.tf32_stem = tf32;
        o.fused_stem = !no_fused_stem;
        o.head = head == "fused" ? HeadMode::Fused : head == "separate" ? HeadMode::Separate : HeadMode::Auto;
        o.branches = branches == "serial"       ? BranchMode::Serial
                     : branches == "concurrent" ? BranchMode::Concurrent
                                                : BranchMode::Auto;
        o.max_graph_plans = max_plans;
        o.tie_tolerance = tie_tolerance;
        const EngineReport first = CudnnEngine(net, size, size, o).report();  // tunes and fills the cache
        const json tuning = {{"tuning_s", first.tuning_seconds}, {"plan_build_s", first.plan_build_seconds},
                             {"tie_tolerance", o.tie_tolerance}, {"tie_groups", first.tie_groups},
                             {"tie_trials", first.tie_trials}, {"tie_swaps", first.tie_swaps},
                             {"ties_before_ms", first.ties_before_ms}, {"ties_after_ms", first.ties_after_ms},
                             {"tie_s", first.tie_seconds}};
        size_t free_before = 0, free_after = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
        CudnnEngine engine(net, size, size, o);  // the same, from the cache
        CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
        std::vector<uint16_t> input(size_t(batch) * size * size * 3);
        std::mt19937 rng(batch);
        std::uniform_real_distribution<float> d(-2.f, 2.f);
        for (auto& v : input) v = float_to_half(d(rng));
        copy_to_device(engine.input(), input.data(), input.size() * 2);
        const double ms = time_gpu(engine.stream(), [&] { engine.enqueue(); }, 10, loops, batch >= 128 ? 200 : 50);
        const auto& r = engine.report();
        const double gpu_mib = double(free_before - free_after) / 1048576.0;
        const auto graph_layers = std::count_if(r.convs.begin(), r.convs.end(), [](const ConvChoice& c) { return c.api == "graph"; });
        fmt::print("{:<10} {:>5} {:>10.3f} {:>10.0f} {:>9.2f} {:>9.2f} {:>10.1f} {:>10.1f} {:>9.0f} {:>13}/{:<2} {}\n", m,
                   batch, ms, batch * 1000.0 / ms, first.setup_seconds, r.setup_seconds, r.activation_bytes / 1048576.0,
                   r.naive_activation_bytes / 1048576.0, gpu_mib, graph_layers, r.convs.size(),
                   fmt::format("{} / {} / {}{}", r.stem, r.head, r.branches,
                               r.concurrent_ms > 0 ? fmt::format(" (concurrent {:.4f} ms, serial {:.4f} ms)",
                                                                 r.concurrent_ms, r.serial_ms)
                                                   : "") +
                       fmt::format("; first start: {} of {} tie swaps kept", first.tie_swaps, first.tie_trials));
        std::fflush(stdout);
        json convs = json::array();
        for (const auto& c : r.convs) {
          convs.push_back({{"layer", c.layer}, {"api", c.api}, {"algo", c.algorithm}, {"math", c.math},
                           {"workspace", c.workspace}, {"tuned_ms", c.tuned_ms}, {"legacy_ms", c.legacy_ms},
                           {"graph_ms", c.graph_ms}, {"source", c.source}});
        }
        results["engine"].push_back({{"model", m}, {"batch", batch}, {"size", size}, {"ms", ms},
                                     {"images_per_s", batch * 1000.0 / ms}, {"startup_cold_s", first.setup_seconds},
                                     {"startup_cached_s", r.setup_seconds}, {"tuning_cold_s", first.tuning_seconds},
                                     {"first_start", tuning}, {"activation_bytes", r.activation_bytes},
                                     {"naive_activation_bytes", r.naive_activation_bytes},
                                     {"workspace_bytes", r.workspace_bytes}, {"weight_bytes", r.weight_bytes},
                                     {"gpu_bytes", free_before - free_after}, {"tf32_stem", tf32}, {"stem", r.stem},
                                     {"stem_note", r.stem_note}, {"head", r.head},
                                     {"head_fused_ms", r.head_fused_ms}, {"head_separate_ms", r.head_separate_ms},
                                     {"branches", r.branches}, {"branch_convs", r.branch_convs},
                                     {"serial_ms", r.serial_ms}, {"concurrent_ms", r.concurrent_ms},
                                     {"max_graph_plans", max_plans}, {"convs", convs}});
        std::ofstream(json_path) << results.dump(2) << "\n";  // after every row: a cut-short run keeps its figures
      }
    }
    std::filesystem::remove(cache);
  } catch (const vc::Error& e) {
    fmt::print(stderr, "bench: {}\n", e.what());
    std::ofstream(json_path) << results.dump(2) << "\n";
    return static_cast<int>(e.code());
  }
  std::ofstream(json_path) << results.dump(2) << "\n";
  fmt::print("\nwrote {}\n", json_path);
  return 0;
}
