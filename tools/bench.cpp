// bench: latency and throughput of the cuDNN engine per model and batch, start-up cold and with the algorithm
// cache, GPU memory, and the preprocessing kernel. Prints a table and writes JSON. Random weights (timing does
// not depend on their values). Runs on a GPU; `--cpu` times the CPU reference engine instead.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/cudnn_engine.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "inference/cuda/gpu_timer.hpp"
#include "inference/model/half.hpp"
#include "inference/cuda/preprocess_gpu.hpp"
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  CUDA_CHECK(cudaMemcpy(dev.get(), frame.data(), frame.size(), cudaMemcpyHostToDevice));
  const auto host_view = packed_frame_view(PixelFormat::NV12, w, h, frame.data());
  auto dev_view = packed_frame_view(PixelFormat::NV12, w, h, dev.get());
  dev_view.memory = MemoryKind::Device;
  PreprocessParams p;
  p.size = 224;
  DeviceBuffer<__half> out(224 * 224 * 3);
  GpuFrameDesc desc{dev_view, resize_geometry(w, h, p)};
  DeviceBuffer<GpuFrameDesc> ddesc(1);
  CUDA_CHECK(cudaMemcpy(ddesc.get(), &desc, sizeof desc, cudaMemcpyHostToDevice));
  const double kernel_ms = time_gpu(stream, [&] { launch_preprocess(ddesc.get(), 1, PixelFormat::NV12, p, out.get(), stream); }, 50, loops);
  GpuPreprocessor pre(p, 1, stream, 1, frame.size());
  const double device_ms = time_gpu(stream, [&] { pre.run(std::span(&dev_view, 1), out.get()); }, 20, loops, 20);
  const double host_ms = time_gpu(stream, [&] { pre.run(std::span(&host_view, 1), out.get()); }, 5, loops, 20);
  return {{"frame", "1920x1080 NV12"}, {"output", "224x224x3 FP16"}, {"kernel_us", kernel_ms * 1000},
          {"device_frame_us", device_ms * 1000}, {"host_frame_us", host_ms * 1000}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench: cuDNN engine latency/throughput, start-up and memory; preprocessing"};
  std::string models = "resnet18,resnet34,resnet50,resnet101,resnet152", batches = "1,8,32,128,256", json_path = "bench.json";
  int size = 224, loops = 7;
  bool cpu = false, tf32 = false;
  app.add_option("--models", models, "comma-separated architectures");
  app.add_option("--batches", batches, "comma-separated batch sizes");
  app.add_option("--size", size, "input size");
  app.add_option("--loops", loops, "timed loops (the median is reported)");
  app.add_option("--json", json_path, "where to write the results");
  app.add_flag("--tf32-stem", tf32, "allow TF32 in the stem");
  app.add_flag("--cpu", cpu, "time the CPU reference engine (batch 1) instead");
  CLI11_PARSE(app, argc, argv);
  vc::log::set_level("warn");

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
      fmt::print("{:<12} {:>7} {:>12.1f}\n", m, size, median(t));
      results["cpu"].push_back({{"model", m}, {"size", size}, {"ms", median(t)}});
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
    results["preprocess"] = bench_preprocess(loops);
    const auto& pp = results["preprocess"];
    fmt::print("preprocess 1920x1080 NV12 -> 224x224 FP16: kernel {:.1f} us, device frame {:.1f} us, host frame {:.1f} us\n\n",
               pp["kernel_us"].get<double>(), pp["device_frame_us"].get<double>(), pp["host_frame_us"].get<double>());

    fmt::print("{:<10} {:>5} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9} {}\n", "model", "batch", "ms", "img/s", "cold s",
               "cached s", "act MiB", "naive MiB", "GPU MiB", "graph-API layers");
    const auto cache = (std::filesystem::temp_directory_path() / "vc-bench-algos.json").string();
    for (const auto& m : parse_names(models)) {
      const auto net = random_resnet(named_resnet(m, 1000), 1);
      for (int batch : parse_ints(batches)) {
        std::filesystem::remove(cache);
        CudnnEngineOptions o;
        o.batch = batch;
        o.cache_path = cache;
        o.tf32_stem = tf32;
        double cold = 0;
        {
          CudnnEngine first(net, size, size, o);  // tunes and fills the cache
          cold = first.report().setup_seconds;
        }
        size_t free_before = 0, free_after = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
        CudnnEngine engine(net, size, size, o);  // the same, from the cache
        CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
        std::vector<uint16_t> input(size_t(batch) * size * size * 3);
        std::mt19937 rng(batch);
        std::uniform_real_distribution<float> d(-2.f, 2.f);
        for (auto& v : input) v = float_to_half(d(rng));
        CUDA_CHECK(cudaMemcpy(engine.input(), input.data(), input.size() * 2, cudaMemcpyHostToDevice));
        const double ms = time_gpu(engine.stream(), [&] { engine.enqueue(); }, 10, loops, batch >= 128 ? 200 : 50);
        const auto& r = engine.report();
        const double gpu_mib = double(free_before - free_after) / 1048576.0;
        const auto graph_layers = std::count_if(r.convs.begin(), r.convs.end(), [](const ConvChoice& c) { return c.api == "graph"; });
        fmt::print("{:<10} {:>5} {:>10.3f} {:>10.0f} {:>9.2f} {:>9.2f} {:>10.1f} {:>10.1f} {:>9.0f} {:>4}/{}\n", m, batch,
                   ms, batch * 1000.0 / ms, cold, r.setup_seconds, r.activation_bytes / 1048576.0,
                   r.naive_activation_bytes / 1048576.0, gpu_mib, graph_layers, r.convs.size());
        std::fflush(stdout);
        json convs = json::array();
        for (const auto& c : r.convs) {
          convs.push_back({{"layer", c.layer}, {"api", c.api}, {"algo", c.algorithm}, {"math", c.math},
                           {"workspace", c.workspace}, {"tuned_ms", c.tuned_ms}, {"legacy_ms", c.legacy_ms},
                           {"graph_ms", c.graph_ms}, {"source", c.source}});
        }
        results["engine"].push_back({{"model", m}, {"batch", batch}, {"size", size}, {"ms", ms},
                                     {"images_per_s", batch * 1000.0 / ms}, {"startup_cold_s", cold},
                                     {"startup_cached_s", r.setup_seconds}, {"activation_bytes", r.activation_bytes},
                                     {"naive_activation_bytes", r.naive_activation_bytes},
                                     {"workspace_bytes", r.workspace_bytes}, {"weight_bytes", r.weight_bytes},
                                     {"gpu_bytes", free_before - free_after}, {"tf32_stem", tf32}, {"convs", convs}});
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
