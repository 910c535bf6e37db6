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

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/cudnn_engine.hpp"
#include "inference/cuda/engine_kernels.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "inference/cuda/gpu_timer.hpp"
#include "inference/model/half.hpp"
#include "inference/cuda/preprocess_gpu.hpp"
#include "inference/model/resnet.hpp"
#include "inference/cuda/stem_kernel.hpp"

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
  const auto dev_view = packed_frame_view(PixelFormat::NV12, w, h, dev.get());
  PreprocessParams p;
  p.size = 224;
  DeviceBuffer<__half> out(224 * 224 * 3);
  GpuFrameDesc desc{dev_view, resize_geometry(w, h, p)};
  DeviceBuffer<GpuFrameDesc> ddesc(1);
  CUDA_CHECK(cudaMemcpy(ddesc.get(), &desc, sizeof desc, cudaMemcpyHostToDevice));
  const double kernel_ms = time_gpu(stream, [&] { launch_preprocess(ddesc.get(), 1, PixelFormat::NV12, p, out.get(), stream); }, 50, loops);
  GpuPreprocessor pre(p, 1, stream, frame.size());
  const double device_ms = time_gpu(stream, [&] { pre.run_device(std::span(&dev_view, 1), out.get()); }, 20, loops, 20);
  const double host_ms = time_gpu(stream, [&] { pre.run(std::span(&host_view, 1), out.get()); }, 5, loops, 20);
  return {{"frame", "1920x1080 NV12"}, {"output", "224x224x3 FP16"}, {"kernel_us", kernel_ms * 1000},
          {"device_frame_us", device_ms * 1000}, {"host_frame_us", host_ms * 1000}};
}

// The engine's cuDNN stem on its own: FP16 input widened to FP32, conv + bias + ReLU in one cuDNN call (the
// fastest algorithm with the given math), max-pool to FP16: the steps CudnnEngine runs without the fused kernel.
class CudnnStem {
 public:
  CudnnStem(cudnnHandle_t handle, int batch, int size, const Layer& conv, bool tf32)
      : handle_(handle), batch_(batch), size_(size), conv_(conv), out_size_(stem_conv_extent(size)) {
    const auto tensor = [](TensorDesc& d, int n, int c, int h, int w, cudnnTensorFormat_t f) {
      cudnnTensorDescriptor_t t;
      CUDNN_CHECK(cudnnCreateTensorDescriptor(&t));
      d = TensorDesc(t);
      CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, f, CUDNN_DATA_FLOAT, n, c, h, w));
    };
    tensor(x_desc_, batch, conv.in_channels, size, size, CUDNN_TENSOR_NHWC);
    tensor(y_desc_, batch, conv.out_channels, out_size_, out_size_, CUDNN_TENSOR_NHWC);
    tensor(bias_desc_, 1, conv.out_channels, 1, 1, CUDNN_TENSOR_NCHW);
    cudnnFilterDescriptor_t f;
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&f));
    w_desc_ = FilterDesc(f);
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, conv.out_channels, conv.in_channels,
                                           conv.kernel, conv.kernel));
    cudnnConvolutionDescriptor_t cd;
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
    conv_desc_ = ConvDesc(cd);
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd, conv.pad, conv.pad, conv.stride, conv.stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    const cudnnMathType_t math = tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    CUDNN_CHECK(cudnnSetConvolutionMathType(cd, math));
    cudnnActivationDescriptor_t a;
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&a));
    act_desc_ = ActivationDesc(a);
    CUDNN_CHECK(cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    weight_ = DeviceBuffer<float>(conv.weight.size());
    bias_ = DeviceBuffer<float>(conv.bias.size());
    CUDA_CHECK(cudaMemcpy(weight_.get(), conv.weight.data(), weight_.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bias_.get(), conv.bias.data(), bias_.bytes(), cudaMemcpyHostToDevice));
    x_ = DeviceBuffer<float>(size_t(batch) * size * size * conv.in_channels);
    y_ = DeviceBuffer<float>(size_t(batch) * out_size_ * out_size_ * conv.out_channels);
    // The engine's rule: the fastest algorithm that ran, fits 256 MiB and uses the asked-for math (strict FP32:
    // FMA only; TF32: no FP16 down-conversion).
    const size_t limit = size_t(256) << 20;
    DeviceBuffer<uint8_t> tuning(limit);
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, x_desc_, x_.get(), w_desc_, weight_.get(), conv_desc_,
                                                       y_desc_, y_.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                       perf, tuning.get(), limit));
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < returned && !best; ++i) {
      const bool math_ok = tf32 ? perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : perf[i].mathType == CUDNN_FMA_MATH;
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit && math_ok) best = &perf[i];
    }
    if (!best) throw vc::InternalError("bench: cuDNN has no usable stem algorithm");
    algo_ = best->algo;
    CUDNN_CHECK(cudnnSetConvolutionMathType(cd, best->mathType));
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_, y_desc_, algo_, &ws_bytes_));
    workspace_ = DeviceBuffer<uint8_t>(ws_bytes_);
    description_ = fmt::format("algo {} {}", int(algo_), best->mathType == CUDNN_FMA_MATH ? "fma" : "tensor-op");
  }

  void run(const __half* in, const Layer& pool, __half* out, cudaStream_t stream) const {
    const float one = 1.f, zero = 0.f;
    launch_half_to_float(in, x_.get(), x_.size(), stream);
    CUDNN_CHECK(cudnnConvolutionBiasActivationForward(handle_, &one, x_desc_, x_.get(), w_desc_, weight_.get(), conv_desc_,
                                                      algo_, workspace_.get(), ws_bytes_, &zero, y_desc_, y_.get(),
                                                      bias_desc_, bias_.get(), act_desc_, y_desc_, y_.get()));
    launch_max_pool(y_.get(), batch_, out_size_, out_size_, conv_.out_channels, pool.kernel, pool.stride, pool.pad, out,
                    stream);
  }
  [[nodiscard]] const std::string& description() const { return description_; }

 private:
  cudnnHandle_t handle_;
  int batch_, size_;
  const Layer& conv_;
  int out_size_;
  TensorDesc x_desc_, y_desc_, bias_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_;
  ActivationDesc act_desc_;
  DeviceBuffer<float> weight_, bias_, x_, y_;
  DeviceBuffer<uint8_t> workspace_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t ws_bytes_ = 0;
  std::string description_;
};

// The stem alone (ResNet-18's: conv 7x7/2 3 -> 64 + ReLU, max-pool 3x3/2) at size x size, FP16 in and out:
// the fused kernel, the strict cuDNN path and the TF32 cuDNN path. TFLOP/s count the conv's useful work
// (2 * 147 * 64 per conv pixel), whatever each path really executes.
json bench_stem(int size, const std::vector<int>& batches, int loops) {
  const auto net = random_resnet(named_resnet("resnet18", 1000), 1);
  const Layer& conv = net.layers[0];
  const Layer& pool = net.layers[1];
  CudaStream stream = make_stream();
  cudnnHandle_t h;
  CUDNN_CHECK(cudnnCreate(&h));
  CudnnHandle handle(h);
  CUDNN_CHECK(cudnnSetStream(handle, stream));
  const std::string unsupported = fused_stem_unsupported(0, conv.in_channels, conv.out_channels);
  std::unique_ptr<FusedStemWeights> fused;
  if (unsupported.empty()) fused = std::make_unique<FusedStemWeights>(conv.weight, conv.bias, conv.in_channels, conv.out_channels);
  else fmt::print("fused stem not available: {}\n", unsupported);
  const int ps = stem_pool_extent(size), cs = stem_conv_extent(size);
  fmt::print("stem {0}x{0}: conv 7x7/2 {1}->{2} + ReLU + max-pool 3x3/2 -> {3}x{3}x{2} FP16; median ms, conv TFLOP/s\n", size,
             conv.in_channels, conv.out_channels, ps);
  fmt::print("{:>5} {:>10} {:>8} {:>11} {:>8} {:>9} {:>8} {:>9} {:>10} {}\n", "batch", "fused ms", "TFLOP/s", "strict ms",
             "TFLOP/s", "tf32 ms", "TFLOP/s", "vs strict", "same bits", "cuDNN algorithms (strict, tf32)");
  json rows = json::array();
  for (int batch : batches) {
    const double flop = 2.0 * kStemKernel * kStemKernel * conv.in_channels * conv.out_channels * cs * cs * batch;
    std::vector<uint16_t> input(size_t(batch) * size * size * conv.in_channels);
    std::mt19937 rng(batch);
    std::uniform_real_distribution<float> d(-2.f, 2.f);
    for (auto& v : input) v = float_to_half(d(rng));
    DeviceBuffer<__half> in(input.size());
    CUDA_CHECK(cudaMemcpy(in.get(), input.data(), in.bytes(), cudaMemcpyHostToDevice));
    const size_t out_count = size_t(batch) * ps * ps * conv.out_channels;
    DeviceBuffer<__half> out_fused(out_count), out_strict(out_count);
    const CudnnStem strict(handle, batch, size, conv, false), tf32(handle, batch, size, conv, true);
    const double target = batch >= 128 ? 200 : 50;
    const double strict_ms = time_gpu(stream, [&] { strict.run(in.get(), pool, out_strict.get(), stream); }, 3, loops, target);
    const double tf32_ms = time_gpu(stream, [&] { tf32.run(in.get(), pool, out_fused.get(), stream); }, 3, loops, target);
    double fused_ms = 0, identical = 0;
    int worst_steps = 0;
    if (fused) {
      fused_ms = time_gpu(stream, [&] { launch_fused_stem(in.get(), batch, size, size, *fused, out_fused.get(), stream); }, 3,
                          loops, target);
      // Agreement with the strict path on this input: same FP16 bits, else how many FP16 steps apart.
      std::vector<uint16_t> a(out_count), b(out_count);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaMemcpy(a.data(), out_fused.get(), out_count * 2, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(b.data(), out_strict.get(), out_count * 2, cudaMemcpyDeviceToHost));
      size_t same = 0;
      for (size_t i = 0; i < out_count; ++i) {
        same += a[i] == b[i];
        // Non-negative FP16 values (after the ReLU) are ordered like their bit patterns: the difference counts
        // steps (-0 counted as +0).
        const auto bits = [](uint16_t v) { return v == 0x8000 ? 0 : int(v); };
        worst_steps = std::max(worst_steps, std::abs(bits(a[i]) - bits(b[i])));
      }
      identical = double(same) / double(out_count);
    }
    const auto tflops = [flop](double ms) { return ms > 0 ? flop / (ms * 1e9) : 0.0; };
    fmt::print("{:>5} {:>10.4f} {:>8.1f} {:>11.4f} {:>8.1f} {:>9.4f} {:>8.1f} {:>8.2f}x {:>9.3f}% {} / {}{}\n", batch,
               fused_ms, tflops(fused_ms), strict_ms, tflops(strict_ms), tf32_ms, tflops(tf32_ms),
               fused_ms > 0 ? strict_ms / fused_ms : 0.0, 100 * identical, strict.description(), tf32.description(),
               fused && worst_steps > 1 ? fmt::format("  (worst {} FP16 steps from strict!)", worst_steps) : "");
    std::fflush(stdout);
    rows.push_back({{"batch", batch}, {"size", size}, {"fused_ms", fused_ms}, {"fused_tflops", tflops(fused_ms)},
                    {"strict_ms", strict_ms}, {"strict_tflops", tflops(strict_ms)}, {"tf32_ms", tf32_ms},
                    {"tf32_tflops", tflops(tf32_ms)}, {"strict_algo", strict.description()}, {"tf32_algo", tf32.description()},
                    {"fused_vs_strict_identical", identical}, {"fused_vs_strict_max_steps", worst_steps},
                    {"fused", fused ? kStemFused : unsupported}});
  }
  fmt::print("\n");
  return rows;
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
    CUDA_CHECK(cudaMemcpy(weight.get(), w.data(), weight.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bias.get(), b.data(), bias.bytes(), cudaMemcpyHostToDevice));
    for (int batch : batches) {
      std::vector<uint16_t> x(size_t(batch) * hw * c);
      for (auto& v : x) v = float_to_half(std::fabs(d(rng)));
      DeviceBuffer<__half> features(x.size());
      CUDA_CHECK(cudaMemcpy(features.get(), x.data(), features.bytes(), cudaMemcpyHostToDevice));
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
  app.add_flag("--cpu", cpu, "time the CPU reference engine (batch 1) instead");
  CLI11_PARSE(app, argc, argv);
  vc::log::set_level("warn");
  const auto sections = parse_names(only);
  const auto wanted = [&](const char* name) { return std::find(sections.begin(), sections.end(), name) != sections.end(); };
  for (const auto& name : sections) {
    if (name != "preprocess" && name != "stem" && name != "head" && name != "engine") {
      fmt::print(stderr, "bench: unknown section '{}' in --only (preprocess, stem, head, engine)\n", name);
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
    if (wanted("preprocess")) {
      results["preprocess"] = bench_preprocess(loops);
      const auto& pp = results["preprocess"];
      fmt::print("preprocess 1920x1080 NV12 -> 224x224 FP16: kernel {:.1f} us, device frame {:.1f} us, host frame {:.1f} us\n\n",
                 pp["kernel_us"].get<double>(), pp["device_frame_us"].get<double>(), pp["host_frame_us"].get<double>());
    }
    if (wanted("stem")) {
      results["stem"] = bench_stem(size, parse_ints(batches), loops);
      std::ofstream(json_path) << results.dump(2) << "\n";
    }
    if (wanted("head")) {
      results["head"] = bench_head(parse_ints(batches), loops);
      std::ofstream(json_path) << results.dump(2) << "\n";
    }
    if (!wanted("engine")) {
      std::ofstream(json_path) << results.dump(2) << "\n";
      fmt::print("wrote {}\n", json_path);
      return 0;
    }

    fmt::print("{:<10} {:>5} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9} {:>16} {}\n", "model", "batch", "ms", "img/s", "cold s",
               "cached s", "act MiB", "naive MiB", "GPU MiB", "graph-API layers", "stem / head");
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
        fmt::print("{:<10} {:>5} {:>10.3f} {:>10.0f} {:>9.2f} {:>9.2f} {:>10.1f} {:>10.1f} {:>9.0f} {:>13}/{:<2} {}\n", m,
                   batch, ms, batch * 1000.0 / ms, cold, r.setup_seconds, r.activation_bytes / 1048576.0,
                   r.naive_activation_bytes / 1048576.0, gpu_mib, graph_layers, r.convs.size(),
                   r.stem + " / " + r.head);
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
                                     {"gpu_bytes", free_before - free_after}, {"tf32_stem", tf32}, {"stem", r.stem},
                                     {"stem_note", r.stem_note}, {"head", r.head},
                                     {"head_fused_ms", r.head_fused_ms}, {"head_separate_ms", r.head_separate_ms},
                                     {"convs", convs}});
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
