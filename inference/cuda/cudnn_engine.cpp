#include "inference/cuda/cudnn_engine.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cuda/algo_cache.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine_kernels.hpp"
#include "inference/cuda/gpu_timer.hpp"
#include "inference/cuda/graph_conv.hpp"
#include "inference/cuda/stem_kernel.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Graph-API plan tuning (tune_graph): every plan is screened with short replays, the kFinalists fastest are timed
// again as long as the legacy call, and finalists within CudnnEngineOptions::tie_tolerance of the fastest are
// settled on the whole forward pass (settle_ties), where a swap must gain more than kTieMargin of the pass.
constexpr int kScreenLoops = 3;
constexpr double kScreenTargetMs = 0.5;
constexpr size_t kFinalists = 3;
constexpr double kTieMargin = 0.002;

const char* math_name(cudnnMathType_t m, bool fp32) {
  if (!fp32) return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? "fp16-tensor-op" : "fp16-fma";
  return m == CUDNN_FMA_MATH ? "fp32-fma" : "tf32-tensor-op";
}

// One buffer per value, or a value's place in a shared pool.
struct Value {
  Shape shape;
  bool fp32 = false;
  bool absent = false;  // never written: the stem conv's output with the fused stem, the pooled features with the
                        // fused head
  void* ptr = nullptr;
  [[nodiscard]] size_t bytes(int batch) const { return size_t(batch) * size_t(shape.elements()) * (fp32 ? 4 : 2); }
};

}  // namespace

struct CudnnEngine::Impl {
  // A convolution as cuDNN runs it.
  struct Conv {
    const Layer* layer = nullptr;
    bool fp32 = false;
    TensorDesc x_desc, y_desc, bias_desc;
    FilterDesc w_desc;
    ConvDesc conv_desc;
    ActivationDesc act_desc;
    DeviceBuffer<uint8_t> weight, bias;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    size_t workspace = 0;
    const void* x = nullptr;
    void* y = nullptr;
    const void* z = nullptr;  // residual, or null
    std::unique_ptr<GraphConv> graph;  // set when the graph-API plan `plan` runs this layer
    int plan = -1;
    std::vector<std::pair<int, float>> tied;  // tune_graph: other plans as fast alone (index, ms)
    size_t trial_workspace = 0;  // the most any of its tied plans needs (the buffers hold it until settle_ties)
  };
  // Layers of one shape (one cache entry) whose tuning left near-tied plans: settle_ties tries each in all of them.
  struct TiedGroup {
    std::string cache_key;
    int tuned = -1;             // the plan the layer-by-layer tuning chose (every member runs it until settled)
    std::vector<size_t> convs;  // indices into convs and report.convs
    std::vector<std::pair<int, float>> plans;
  };
  std::vector<TiedGroup> ties;

  const Network& net;
  CudnnEngineOptions opt;
  int h, w;
  EngineReport report;
  std::shared_ptr<spdlog::logger> log = vc::log::get("inference");

  CudaStream stream;
  CudnnHandle handle;
  std::vector<Value> values;
  std::vector<DeviceBuffer<uint8_t>> activation_buffers;
  DeviceBuffer<__half> input;
  DeviceBuffer<float> stem_input;  // the FP16 input widened for the cuDNN FP32 stem
  bool stem_fused = false;         // conv + ReLU + max-pool run as one kernel of ours
  bool head_fused = false;         // global average pool + classifier as one kernel
  int multiprocessors = 0;
  std::unique_ptr<FusedStemWeights> fused_stem;
  DeviceBuffer<float> fc_weight, fc_bias, logits;
  DeviceBuffer<uint8_t> workspace;
  std::vector<std::unique_ptr<Conv>> convs;
  struct Step {
    StepTime info;  // name and layer (its ms filled by time_steps)
    std::function<void()> run;
    bool branch = false;  // a downsample convolution that may run beside the next step (BranchMode)
  };
  std::vector<Step> steps;
  bool concurrent = false;          // branch steps run on side_stream, joined after the step that follows them
  CudaStream side_stream;
  CudaEvent fork_event, join_event;
  DeviceBuffer<uint8_t> side_workspace;  // the branch convolutions' own workspace (they overlap the main one's)
  CudaGraph graph;
  CudaGraphExec graph_exec;

  Impl(const Network& network, int height, int width, const CudnnEngineOptions& options)
      : net(network), opt(options), h(height), w(width) {
    const auto t0 = Clock::now();
    check_structure();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || opt.device >= count) {
      cudaGetLastError();
      throw UnavailableError(fmt::format("no CUDA device {} ({} found)", opt.device, count));
    }
    CUDA_CHECK(cudaSetDevice(opt.device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));
    report.gpu = prop.name;
    multiprocessors = prop.multiProcessorCount;
    stream = make_stream();
    cudnnHandle_t hnd;
    CUDNN_CHECK(cudnnCreate(&hnd));
    handle = CudnnHandle(hnd);
    CUDNN_CHECK(cudnnSetStream(handle, stream));

    choose_stem();
    plan_values();
    check_memory();
    allocate_values();
    for (const auto& l : net.layers) {
      if (l.kind == LayerKind::Conv && !(stem_fused && &l == &net.layers[0])) convs.push_back(make_conv(l));
    }
    if (stem_fused) {
      const Layer& stem = net.layers[0];
      fused_stem = std::make_unique<FusedStemWeights>(stem.weight, stem.bias, stem.in_channels, stem.out_channels);
      report.weight_bytes += fused_stem->bytes();
    }
    fc_weight = upload(net.layers.back().weight);
    fc_bias = upload(net.layers.back().bias);
    logits = DeviceBuffer<float>(size_t(opt.batch) * net.num_classes);

    choose_algorithms(prop);
    choose_head();
    build_steps();
    prepare_branches();
    // Run once eagerly (loads every kernel), then capture the whole forward pass.
    run_steps();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    settle_ties();
    size_workspaces();
    choose_branches();
    report.setup_seconds = seconds_since(t0);
    log->info("cuDNN engine on {}: batch {}, {}x{}, activations {:.1f} MiB in {} buffers (naive {:.1f} MiB), "
              "workspace {:.1f} MiB, weights {:.1f} MiB, set-up {:.2f} s ({} cached, {} tuned)",
              report.gpu, opt.batch, h, w, report.activation_bytes / 1048576.0, report.activation_buffers,
              report.naive_activation_bytes / 1048576.0, report.workspace_bytes / 1048576.0,
              report.weight_bytes / 1048576.0, report.setup_seconds, report.cache_hits, report.cache_misses);
    log->info("stem: {}{}; head: {}{}; {} downsample convolution(s) {}{}", report.stem,
              report.stem_note.empty() ? "" : " (fused kernel not used: " + report.stem_note + ")", report.head,
              report.head_fused_ms > 0 ? fmt::format(" (fused {:.4f} ms, separate {:.4f} ms)", report.head_fused_ms,
                                                     report.head_separate_ms)
                                       : "",
              report.branch_convs, report.branches,
              report.concurrent_ms > 0 ? fmt::format(" (forward pass concurrent {:.4f} ms, serial {:.4f} ms)",
                                                     report.concurrent_ms, report.serial_ms)
                                       : "");
    if (report.cache_misses > 0) {
      log->info("tuning {:.2f} s ({:.2f} s compiling graph plans); {} layer shape(s) with near-tied plans, {} of {} "
                "swaps kept on the whole forward pass ({:.4f} -> {:.4f} ms, {:.2f} s)",
                report.tuning_seconds, report.plan_build_seconds, report.tie_groups, report.tie_swaps, report.tie_trials,
                report.ties_before_ms, report.ties_after_ms, report.tie_seconds);
    }
  }

  // The engine runs the ResNet shape: conv stem on the input, max-pool, convolutions, global pool, classifier.
  void check_structure() const {
    const auto& L = net.layers;
    const bool ok = L.size() >= 4 && L[0].kind == LayerKind::Conv && L[0].input == 0 && L[1].kind == LayerKind::MaxPool &&
                    L[1].input == L[0].output && L[L.size() - 2].kind == LayerKind::GlobalAvgPool &&
                    L.back().kind == LayerKind::FullyConnected && L.back().input == L[L.size() - 2].output &&
                    std::all_of(L.begin() + 2, L.end() - 2, [](const Layer& l) { return l.kind == LayerKind::Conv; });
    if (!ok) throw InternalError("cuDNN engine: the network is not stem conv, max-pool, convolutions, pool, fc");
    if (opt.batch < 1) throw InternalError("cuDNN engine: batch must be >= 1");
  }

  // The fused stem kernel replaces half_to_float + cuDNN conv + max-pool wherever it can run.
  void choose_stem() {
    report.stem_note = fused_stem_refusal();
    stem_fused = report.stem_note.empty();
    report.stem = stem_fused ? kStemFused : opt.tf32_stem ? kStemCudnnTf32 : kStemCudnnFp32;
  }

  // Why the fused stem cannot run ("" when it can).
  std::string fused_stem_refusal() const {
    const Layer& conv = net.layers[0];
    const Layer& pool = net.layers[1];
    if (!opt.fused_stem) return "fused_stem is off";
    if (opt.tf32_stem) return "the TF32 stem was asked for";
    if (opt.algorithms.count(conv.name) || opt.safe_layers.count(conv.name)) {
      return "an algorithm choice names " + conv.name;  // honour it in cuDNN
    }
    if (conv.kernel != kStemKernel || conv.stride != kStemStride || conv.pad != kStemPad || conv.groups != 1 ||
        !conv.relu || conv.residual >= 0) {
      return conv.name + " is not a 7x7 stride-2 pad-3 convolution + ReLU";
    }
    if (pool.kernel != kStemPoolKernel || pool.stride != kStemPoolStride || pool.pad != kStemPoolPad) {
      return pool.name + " is not a 3x3 stride-2 pad-1 max-pool";
    }
    if (net.last_uses()[size_t(conv.output)] != 1) return "the stem's output is read by more than the pool";
    return fused_stem_unsupported(opt.device, conv.in_channels, conv.out_channels);
  }

  // The head's two ways, on the engine's buffers.
  void run_head(bool fused) {
    const Layer& fc = net.layers.back();
    const Value& features = values[net.layers[net.layers.size() - 2].input];
    const Value& pooled = values[fc.input];
    const int n = opt.batch, hw = features.shape.h * features.shape.w;
    const auto* x = static_cast<const __half*>(features.ptr);
    if (fused) {
      launch_pooled_classifier(x, n, hw, features.shape.c, fc_weight.get(), fc_bias.get(), fc.out_channels, logits.get(),
                               multiprocessors, stream);
    } else {
      launch_global_avg_pool(x, n, hw, features.shape.c, static_cast<float*>(pooled.ptr), stream);
      launch_fully_connected(static_cast<const float*>(pooled.ptr), n, fc.in_channels, fc_weight.get(), fc_bias.get(),
                             fc.out_channels, logits.get(), stream);
    }
  }

  // Both heads give the same bits, so this is only about time: timed where it may be chosen, replayed in a CUDA
  // graph (each takes a few microseconds).
  void choose_head() {
    switch (opt.head) {
      case HeadMode::Separate: head_fused = false; break;
      case HeadMode::Fused: head_fused = true; break;
      case HeadMode::Auto:
        if (opt.autotune && !opt.keep_all_values) {
          report.head_separate_ms = float(median_replayed_ms(stream, [&] { run_head(false); }, 7));
          report.head_fused_ms = float(median_replayed_ms(stream, [&] { run_head(true); }, 7));
          head_fused = report.head_fused_ms < report.head_separate_ms;
        }
        break;
    }
    // The pooled features keep their (small) buffer, used by the timing above, but are never written.
    if (head_fused) values[net.layers.back().input].absent = true;
    report.head = head_fused ? kHeadFused : kHeadSeparate;
  }

  template <typename T>
  DeviceBuffer<T> upload(const std::vector<T>& host) {
    DeviceBuffer<T> d(host.size());
    CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    report.weight_bytes += d.bytes();
    return d;
  }

  // Shapes and precisions of every value: FP32 from the stem conv and from the pool on, FP16 elsewhere.
  void plan_values() {
    const auto shapes = net.value_shapes(h, w);
    values.resize(net.num_values);
    for (int v = 0; v < net.num_values; ++v) values[v].shape = shapes[v];
    values[net.layers[0].output].fp32 = true;
    values[net.layers[net.layers.size() - 2].output].fp32 = true;
    values[net.layers.back().output].fp32 = true;
    if (stem_fused) values[net.layers[0].output].absent = true;
    for (const auto& v : values) report.naive_activation_bytes += v.bytes(opt.batch);
  }

  // The values of the body (FP16, produced by max-pool and the convolutions) share a pool of equal buffers:
  // a buffer is free again after the last layer that reads its value. The others get their own buffers.
  std::vector<int> assign_pool(int& pool_count, size_t& pool_bytes) const {
    std::vector<int> slot(net.num_values, -1);
    const std::vector<int> last_use = net.last_uses();
    std::vector<bool> busy;
    pool_bytes = 0;
    for (int i = 1; i < int(net.layers.size()) - 2; ++i) {  // max-pool .. last conv
      const int out = net.layers[i].output;
      pool_bytes = std::max(pool_bytes, values[out].bytes(opt.batch));
      auto free_slot = std::find(busy.begin(), busy.end(), false);
      slot[out] = int(free_slot - busy.begin());
      if (free_slot == busy.end()) busy.push_back(true);
      else *free_slot = true;
      for (int v : {net.layers[i].input, net.layers[i].residual}) {
        if (v >= 0 && last_use[v] == i && slot[v] >= 0) busy[slot[v]] = false;
      }
    }
    pool_count = int(busy.size());
    return slot;
  }

  size_t planned_activation_bytes() const {
    int count = 0;
    size_t each = 0;
    std::vector<int> slot(net.num_values, -1);
    if (!opt.keep_all_values) slot = assign_pool(count, each);
    size_t total = size_t(count) * each;
    for (int v = 0; v < net.num_values; ++v) {
      if (slot[v] < 0 && !values[v].absent) total += values[v].bytes(opt.batch);
    }
    return total;
  }

  // Fails early, saying how much is needed, if the plan cannot fit (the workspace limit counted in full).
  void check_memory() const {
    // cuDNN describes tensors with 32-bit element counts: say so plainly rather than fail inside a descriptor.
    for (const auto& v : values) {
      const size_t elements = size_t(opt.batch) * size_t(v.shape.elements());
      if (elements > size_t(INT32_MAX)) {
        throw UnavailableError(fmt::format(
            "batch {} at {}x{} makes a {}x{}x{} activation of {} elements per batch, over cuDNN's limit of 2^31: "
            "lower inference.batch_size or model.input_size", opt.batch, h, w, v.shape.h, v.shape.w, v.shape.c, elements));
      }
    }
    size_t weights = 0;
    for (const auto& l : net.layers) weights += (l.weight.size() + l.bias.size()) * 4;
    const size_t needed = planned_activation_bytes() + weights + opt.workspace_limit +
                          (stem_fused ? 0 : values[0].bytes(opt.batch) * 2) /* stem input as FP32 */;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (needed > free_b) {
      throw UnavailableError(fmt::format(
          "the cuDNN engine needs about {:.0f} MiB of GPU memory for batch {} at {}x{} but only {:.0f} MiB of {:.0f} MiB "
          "is free: lower inference.batch_size or inference.workspace_mb",
          needed / 1048576.0, opt.batch, h, w, free_b / 1048576.0, total_b / 1048576.0));
    }
  }

  void allocate_values() {
    input = DeviceBuffer<__half>(size_t(opt.batch) * values[0].shape.elements());
    values[0].ptr = input.get();
    if (!stem_fused) stem_input = DeviceBuffer<float>(input.size());
    int pool_count = 0;
    size_t pool_bytes = 0;
    std::vector<int> slot(net.num_values, -1);
    if (!opt.keep_all_values) slot = assign_pool(pool_count, pool_bytes);
    for (int i = 0; i < pool_count; ++i) activation_buffers.emplace_back(pool_bytes);
    for (int v = 1; v < net.num_values; ++v) {
      if (v == net.layers.back().output || values[v].absent) continue;  // the logits have their own buffer
      if (slot[v] >= 0) {
        values[v].ptr = activation_buffers[slot[v]].get();
      } else {
        activation_buffers.emplace_back(values[v].bytes(opt.batch));
        values[v].ptr = activation_buffers.back().get();
      }
    }
    report.activation_buffers = int(activation_buffers.size());
    for (const auto& b : activation_buffers) report.activation_bytes += b.bytes();
  }

  static void set_tensor(TensorDesc& d, cudnnDataType_t type, int n, int c, int hh, int ww) {
    cudnnTensorDescriptor_t t;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&t));
    d = TensorDesc(t);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NHWC, type, n, c, hh, ww));
  }

  std::unique_ptr<Conv> make_conv(const Layer& l) {
    auto c = std::make_unique<Conv>();
    c->layer = &l;
    c->fp32 = l.input == 0;  // the stem
    const cudnnDataType_t type = c->fp32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_HALF;
    const Shape& is = values[l.input].shape;
    const Shape& os = values[l.output].shape;
    set_tensor(c->x_desc, type, opt.batch, is.c, is.h, is.w);
    set_tensor(c->y_desc, type, opt.batch, os.c, os.h, os.w);
    cudnnTensorDescriptor_t bias_t;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_t));
    c->bias_desc = TensorDesc(bias_t);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_t, CUDNN_TENSOR_NCHW, type, 1, l.out_channels, 1, 1));
    cudnnFilterDescriptor_t f;
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&f));
    c->w_desc = FilterDesc(f);
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(f, type, CUDNN_TENSOR_NHWC, l.out_channels, l.in_channels / l.groups,
                                           l.kernel, l.kernel));
    cudnnConvolutionDescriptor_t cd;
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
    c->conv_desc = ConvDesc(cd);
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd, l.pad, l.pad, l.stride, l.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(cd, l.groups));
    CUDNN_CHECK(cudnnSetConvolutionMathType(cd, c->fp32 && !opt.tf32_stem ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    cudnnActivationDescriptor_t a;
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&a));
    c->act_desc = ActivationDesc(a);
    CUDNN_CHECK(cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    // Weights (already OHWI = cuDNN's NHWC filter layout) and bias, in the layer's precision.
    if (c->fp32) {
      c->weight = to_device_bytes(l.weight.data(), l.weight.size() * 4);
      c->bias = to_device_bytes(l.bias.data(), l.bias.size() * 4);
    } else {
      std::vector<uint16_t> wh(l.weight.size()), bh(l.bias.size());
      std::transform(l.weight.begin(), l.weight.end(), wh.begin(), float_to_half);
      std::transform(l.bias.begin(), l.bias.end(), bh.begin(), float_to_half);
      c->weight = to_device_bytes(wh.data(), wh.size() * 2);
      c->bias = to_device_bytes(bh.data(), bh.size() * 2);
    }
    c->x = c->fp32 ? static_cast<const void*>(stem_input.get()) : values[l.input].ptr;
    c->y = values[l.output].ptr;
    c->z = l.residual >= 0 ? values[l.residual].ptr : nullptr;
    return c;
  }

  DeviceBuffer<uint8_t> to_device_bytes(const void* host, size_t bytes) {
    DeviceBuffer<uint8_t> d(bytes);
    CUDA_CHECK(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice));
    report.weight_bytes += bytes;
    return d;
  }

  std::string cache_key(const Conv& c, const cudaDeviceProp& prop) const {
    const Layer& l = *c.layer;
    const Shape& is = values[l.input].shape;
    // The epilogue is part of the key: a graph-API plan index means a different engine for another operation graph
    // (ResNet-50's layer1.0.downsample and layer1.0.conv3 are the same convolution, one without ReLU and residual).
    return fmt::format("{}|sm{}{}|cudnn{}|n{}|in{}x{}x{}|out{}|k{}s{}p{}g{}|{}{}{}{}|ws{}", prop.name, prop.major, prop.minor,
                       cudnnGetVersion(), opt.batch, is.h, is.w, is.c, l.out_channels, l.kernel, l.stride, l.pad, l.groups,
                       c.fp32 ? (opt.tf32_stem ? "tf32" : "fp32") : "fp16", c.z ? "|res" : "", l.relu ? "|relu" : "",
                       opt.deterministic ? "|det" : "", opt.workspace_limit >> 20);
  }

  bool acceptable_math(const Conv& c, cudnnMathType_t m) const {
    if (c.fp32 && !opt.tf32_stem) return m == CUDNN_FMA_MATH;  // strict FP32: no TF32 down-conversion
    return m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  }

  // The first of cuDNN's ranked algorithms that ran, fits the workspace and meets the precision and determinism
  // options; null if none does.
  const cudnnConvolutionFwdAlgoPerf_t* first_usable(const Conv& c, const cudnnConvolutionFwdAlgoPerf_t* perf,
                                                     int count) const {
    for (int i = 0; i < count; ++i) {
      const auto& p = perf[i];
      if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= opt.workspace_limit && acceptable_math(c, p.mathType) &&
          (!opt.deterministic || p.determinism == CUDNN_DETERMINISTIC)) {
        return &p;
      }
    }
    return nullptr;
  }

  void choose_algorithms(const cudaDeviceProp& prop) {
    AlgoCache cache(opt.cache_path);
    const auto t0 = Clock::now();
    DeviceBuffer<uint8_t> tuning_workspace;
    size_t max_workspace = 0;
    for (size_t index = 0; index < convs.size(); ++index) {
      Conv& c = *convs[index];
      ConvChoice choice;
      choice.layer = c.layer->name;
      if (opt.safe_layers.count(c.layer->name)) {
        choose_safe(c, choice);
        max_workspace = std::max(max_workspace, c.workspace);
        report.convs.push_back(choice);
        continue;
      }
      cudnnMathType_t math = c.fp32 && !opt.tf32_stem ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
      const auto key = cache_key(c, prop);
      if (auto it = opt.algorithms.find(c.layer->name); it != opt.algorithms.end()) {
        c.algo = cudnnConvolutionFwdAlgo_t(it->second);
        choice.source = "override";
      } else if (auto hit = cache.find(key); hit && opt.autotune) {
        c.algo = cudnnConvolutionFwdAlgo_t(hit->algorithm);
        math = cudnnMathType_t(hit->math);
        choice.tuned_ms = hit->ms;
        choice.source = "cache";
        ++report.cache_hits;
      } else if (opt.autotune) {
        if (!tuning_workspace.get() && opt.workspace_limit) tuning_workspace = DeviceBuffer<uint8_t>(opt.workspace_limit);
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int returned = 0;
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, c.x_desc, c.x, c.w_desc, c.weight.get(), c.conv_desc,
                                                           c.y_desc, c.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                           perf, tuning_workspace.get(), opt.workspace_limit));
        const auto* best = first_usable(c, perf, returned);
        if (!best) throw InternalError(fmt::format("cuDNN has no usable algorithm for {} (batch {})", c.layer->name, opt.batch));
        c.algo = best->algo;
        math = best->mathType;
        choice.tuned_ms = best->time;
        choice.source = "autotune";
        cache.put(key, {int(best->algo), int(best->mathType), false, best->memory, best->time});
        ++report.cache_misses;
      } else {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int returned = 0;
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
        const auto* suggested = first_usable(c, perf, returned);
        if (!suggested) throw InternalError(fmt::format("cuDNN suggests no usable algorithm for {}", c.layer->name));
        c.algo = suggested->algo;
        math = suggested->mathType;
        choice.source = "heuristic";
      }
      CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv_desc, math));
      const auto status = cudnnGetConvolutionForwardWorkspaceSize(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc,
                                                                  c.algo, &c.workspace);
      if (status != CUDNN_STATUS_SUCCESS) {
        if (choice.source == "override") {
          throw ConfigError(fmt::format("inference.algorithms.{}: algorithm {} is not supported for this layer ({})",
                                        c.layer->name, int(c.algo), cudnnGetErrorString(status)));
        }
        CUDNN_CHECK(status);
      }
      choice.api = "legacy";
      choice.algorithm = int(c.algo);
      choice.math = math_name(math, c.fp32);
      if (!c.fp32 && opt.autotune && choice.source != "override") {
        const auto graph_key = key + "|api|graph-timed";  // (entries timed eagerly, before, are not reused)
        if (auto hit = cache.find(graph_key); hit && (!hit->graph || use_graph_plan(c, hit->algorithm))) {
          choice.tuned_ms = hit->ms;
          join_ties(graph_key, index);  // a layer of a shape tuned earlier in this start
        } else {
          if (!tuning_workspace.get() && opt.workspace_limit) tuning_workspace = DeviceBuffer<uint8_t>(opt.workspace_limit);
          tune_graph(c, choice, tuning_workspace.get());
          cache.put(graph_key, {c.graph ? c.plan : int(c.algo), int(math), bool(c.graph), c.workspace, choice.tuned_ms});
          if (!c.tied.empty() && opt.cuda_graph) {
            ties.push_back({graph_key, c.plan, {}, c.tied});
            join_ties(graph_key, index);
          }
        }
        if (c.graph) {
          choice.api = "graph";
          choice.algorithm = c.plan;
          choice.math = "fp16-graph";
        }
      }
      max_workspace = std::max({max_workspace, c.workspace, c.trial_workspace});
      choice.workspace = c.workspace;
      report.convs.push_back(choice);
    }
    tuning_workspace = DeviceBuffer<uint8_t>();
    workspace = DeviceBuffer<uint8_t>(max_workspace);
    report.workspace_bytes = max_workspace;
    report.tuning_seconds = seconds_since(t0);
    if (opt.autotune) cache.save();
  }

  // The most stable way cuDNN runs this layer, for diagnosis: the legacy API, implicit GEMM (else its
  // precomputed-index variant, else plain GEMM, where cuDNN refuses it), no Tensor Cores: FMA for the FP32 stem,
  // default math for FP16 (Tensor-Core math only if cuDNN has none of these without). Each candidate is run
  // once: some combinations are refused only at execution.
  void choose_safe(Conv& c, ConvChoice& choice) {
    std::vector<cudnnMathType_t> maths{CUDNN_FMA_MATH};
    if (!c.fp32) maths = {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH};
    for (const auto math : maths) {
      CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv_desc, math));
      for (const auto algo : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM}) {
        size_t bytes = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(handle, c.x_desc, c.w_desc, c.conv_desc, c.y_desc, algo, &bytes) !=
                CUDNN_STATUS_SUCCESS ||
            bytes > opt.workspace_limit) {
          continue;
        }
        c.algo = algo;
        c.workspace = bytes;
        try {
          const DeviceBuffer<uint8_t> trial(bytes);
          run_conv(c, trial.get());
          CUDA_CHECK(cudaStreamSynchronize(stream));
        } catch (const InternalError& e) {
          log->debug("{}: safe algorithm {} (math {}) refused ({})", c.layer->name, int(algo), int(math), e.what());
          continue;
        }
        choice.api = "legacy";
        choice.algorithm = int(algo);
        choice.math = math_name(math, c.fp32);
        choice.source = "safe";
        choice.workspace = bytes;
        return;
      }
    }
    throw InternalError(fmt::format("cuDNN runs {} with none of its implicit-GEMM/GEMM algorithms", c.layer->name));
  }

  // Median GPU time of one call of `fn`, in ms, as a CUDA graph runs it (gpu_timer.hpp: eager timing of a
  // small-batch convolution measures cuDNN's host overhead more than the kernel, and chose plans by it).
  // Replays of about 1 ms, 7 timed: the legacy call and tune_graph's finalists. (Choosing among all plans with
  // replays of 0.5 ms, 5 timed, picked the slower of ResNet-50's near-tied plans at batch 1 more often.)
  template <typename Fn>
  float time_on_stream(Fn fn) {
    return float(median_replayed_ms(stream, fn, /*loops=*/7, /*target_ms=*/1.0));
  }

  GraphConvShape graph_shape(const Conv& c) const {
    const Layer& l = *c.layer;
    const Shape& is = values[l.input].shape;
    const Shape& os = values[l.output].shape;
    return {opt.batch, is.h, is.w, is.c, os.h, os.w, os.c, l.kernel, l.stride, l.pad, l.groups, c.z != nullptr, l.relu};
  }

  // A cached graph plan: rebuild just that plan. False (legacy is kept) if it no longer builds.
  bool use_graph_plan(Conv& c, int plan) {
    try {
      auto g = std::make_unique<GraphConv>(handle, graph_shape(c), opt.deterministic);
      if (!g->build(plan) || size_t(g->workspace_size(plan)) > opt.workspace_limit) return false;
      c.workspace = size_t(g->workspace_size(plan));
      c.graph = std::move(g);
      c.plan = plan;
      return true;
    } catch (const InternalError& e) {
      log->debug("{}: graph API unavailable ({})", c.layer->name, e.what());
      return false;
    }
  }

  // Times the legacy choice against the first max_graph_plans graph-API plans: every plan with short replays, then
  // the kFinalists fastest as long as the legacy call. Keeps the fastest; finalists within opt.tie_tolerance of it
  // stay in c.tied for settle_ties. (Timing all 16 plans as long as the legacy call took ResNet-50's first start at
  // batch 256 from 1.9 to 21 s.)
  void tune_graph(Conv& c, ConvChoice& choice, void* tuning_workspace) {
    const float legacy_ms = time_on_stream([&] { run_conv(c, tuning_workspace); });
    choice.legacy_ms = choice.tuned_ms = legacy_ms;
    std::unique_ptr<GraphConv> g;
    try {
      g = std::make_unique<GraphConv>(handle, graph_shape(c), opt.deterministic);
    } catch (const InternalError& e) {
      log->debug("{}: graph API unavailable ({})", c.layer->name, e.what());
      return;
    }
    const auto plan_call = [&](int i) {
      return [&, i] { g->execute(i, c.x, c.weight.get(), c.bias.get(), c.z, c.y, tuning_workspace); };
    };
    // (ms, plan) pairs of the plans that ran; ties go to the heuristics' better rank.
    const auto time_plans = [&](const std::vector<int>& plans, auto&& timer) {
      std::vector<std::pair<float, int>> out;
      for (const int i : plans) {
        try {
          out.emplace_back(timer(plan_call(i)), i);
        } catch (const InternalError& e) {
          log->debug("{}: graph plan {} failed ({})", c.layer->name, i, e.what());
          CUDA_CHECK(cudaStreamSynchronize(stream));
        }
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    std::vector<int> plans;
    for (int i = 0; i < std::min(opt.max_graph_plans, g->candidate_count()); ++i) {
      const auto t0 = Clock::now();
      const bool built = g->build(i);
      report.plan_build_seconds += seconds_since(t0);
      if (built && size_t(g->workspace_size(i)) <= opt.workspace_limit) plans.push_back(i);
    }
    auto screened = time_plans(plans, [&](auto&& fn) {
      return float(median_replayed_ms(stream, fn, kScreenLoops, kScreenTargetMs));
    });
    plans.clear();
    for (size_t k = 0; k < std::min(screened.size(), kFinalists); ++k) plans.push_back(screened[k].second);
    const auto finalists = time_plans(plans, [&](auto&& fn) { return time_on_stream(fn); });
    if (finalists.empty()) return;
    const auto [best, best_plan] = finalists.front();
    choice.graph_ms = best;
    if (best >= legacy_ms) return;
    c.workspace = size_t(g->workspace_size(best_plan));
    c.plan = best_plan;
    choice.tuned_ms = best;
    for (size_t k = 1; k < finalists.size(); ++k) {
      if (opt.tie_tolerance > 0 && finalists[k].first <= best * (1 + opt.tie_tolerance)) c.tied.emplace_back(finalists[k].second, finalists[k].first);
    }
    c.graph = std::move(g);
  }

  // Adds convs[index] to the tie group of its shape (its cache key) if this start tuned one and the layer runs the
  // group's tuned plan: its GraphConv then holds the same candidates, and its buffers are sized for the most
  // workspace any of them needs.
  void join_ties(const std::string& cache_key, size_t index) {
    Conv& c = *convs[index];
    const auto group = std::find_if(ties.begin(), ties.end(), [&](const TiedGroup& t) {
      return t.cache_key == cache_key && t.tuned == c.plan;
    });
    if (group == ties.end() || !c.graph) return;
    for (const auto& [plan, ms] : group->plans) {
      if (c.graph->build(plan)) c.trial_workspace = std::max(c.trial_workspace, size_t(c.graph->workspace_size(plan)));
    }
    group->convs.push_back(index);
  }

  // Runs every layer of `group` with graph plan `plan`; false (nothing changed in the layer that failed) if a layer
  // cannot build it or it needs more workspace than was allocated.
  bool set_plan(const TiedGroup& group, int plan) {
    for (const size_t index : group.convs) {
      Conv& c = *convs[index];
      if (!c.graph->build(plan)) return false;
      const auto bytes = size_t(c.graph->workspace_size(plan));
      const bool branch = is_branch(int(c.layer - net.layers.data()));
      if (bytes > workspace.size() || (branch && side_stream.get() && bytes > side_workspace.size())) return false;
      c.plan = plan;
      c.workspace = bytes;
    }
    return true;
  }

  // Settles the near-tied plans tune_graph left (a layer's time alone cannot tell them apart, the forward pass
  // can, a little: 0 to -1.2 % on the H200). For each shape in network
  // order, every tied plan is put in all its layers, the forward pass captured and its replays timed; the faster
  // pass is kept if it gains more than kTieMargin. The cache keeps the settled plan, so cached starts run it.
  void settle_ties() {
    report.tie_groups = int(ties.size());
    if (ties.empty()) return;
    const auto t0 = Clock::now();
    capture();
    double best = time_graph();
    report.ties_before_ms = float(best);
    AlgoCache cache(opt.cache_path);
    for (const auto& group : ties) {
      if (group.convs.empty()) continue;
      const size_t first = group.convs.front();
      const int tuned = group.tuned;
      int kept = tuned;
      float kept_ms = report.convs[first].tuned_ms;
      for (const auto& [plan, ms] : group.plans) {
        if (!set_plan(group, plan)) {
          set_plan(group, kept);
          continue;
        }
        double pass = INFINITY;
        try {
          capture();
          pass = time_graph();
        } catch (const InternalError& e) {
          log->debug("{}: plan {} in the forward pass failed ({})", report.convs[first].layer, plan, e.what());
          CUDA_CHECK(cudaStreamSynchronize(stream));
        }
        ++report.tie_trials;
        if (pass < best * (1 - kTieMargin)) {
          best = pass;
          kept = plan;
          kept_ms = ms;
        }
      }
      if (!set_plan(group, kept)) throw InternalError("cuDNN engine: a settled graph plan no longer builds");
      if (kept == tuned) continue;
      ++report.tie_swaps;
      for (const size_t index : group.convs) {
        report.convs[index].algorithm = kept;
        report.convs[index].tuned_ms = kept_ms;
        report.convs[index].workspace = convs[index]->workspace;
      }
      auto entry = cache.find(group.cache_key).value_or(CachedAlgo{});
      entry.algorithm = kept;
      entry.graph = true;
      entry.workspace = convs[first]->workspace;
      entry.ms = kept_ms;
      cache.put(group.cache_key, entry);
    }
    report.ties_after_ms = float(best);
    report.tie_seconds = seconds_since(t0);
    cache.save();
  }

  // The workspaces as the chosen plans need them (tuning sized them for every tied plan).
  void size_workspaces() {
    size_t main = 0, side = 0;
    for (const auto& c : convs) {
      main = std::max(main, c->workspace);
      if (side_stream.get() && is_branch(int(c->layer - net.layers.data()))) side = std::max(side, c->workspace);
      c->trial_workspace = 0;
    }
    if (main < workspace.size()) workspace = DeviceBuffer<uint8_t>(main);
    if (side < side_workspace.size()) side_workspace = DeviceBuffer<uint8_t>(side);
    report.workspace_bytes = workspace.size() + side_workspace.size();
  }

  void run_conv(const Conv& c, void* ws) const {
    const float one = 1.f, zero = 0.f;
    const Layer& l = *c.layer;
    if (c.graph) {
      c.graph->execute(c.plan, c.x, c.weight.get(), c.bias.get(), c.z, c.y, ws);
      return;
    }
    if (l.relu) {
      // y = relu(conv(x) + z + bias) in one call; without a residual z aliases y with weight 0.
      CUDNN_CHECK(cudnnConvolutionBiasActivationForward(handle, &one, c.x_desc, c.x, c.w_desc, c.weight.get(), c.conv_desc,
                                                        c.algo, ws, c.workspace, c.z ? &one : &zero,
                                                        c.y_desc, c.z ? c.z : c.y, c.bias_desc, c.bias.get(), c.act_desc,
                                                        c.y_desc, c.y));
    } else {
      // The fused call allows no activation except with one algorithm: convolve, then add the bias (and residual).
      CUDNN_CHECK(cudnnConvolutionForward(handle, &one, c.x_desc, c.x, c.w_desc, c.weight.get(), c.conv_desc, c.algo,
                                          ws, c.workspace, &zero, c.y_desc, c.y));
      CUDNN_CHECK(cudnnAddTensor(handle, &one, c.bias_desc, c.bias.get(), &one, c.y_desc, c.y));
      if (c.z) CUDNN_CHECK(cudnnAddTensor(handle, &one, c.y_desc, c.z, &one, c.y_desc, c.y));
    }
  }

  void build_steps() {
    const int n = opt.batch;
    const auto add = [this](std::string name, int layer, std::function<void()> run) {
      steps.push_back({{std::move(name), layer, 0.0}, std::move(run)});
    };
    if (!stem_fused) add("input to FP32", -1, [this] { launch_half_to_float(input.get(), stem_input.get(), input.size(), stream); });
    size_t next_conv = 0;
    for (int i = 0; i < int(net.layers.size()); ++i) {
      const Layer& l = net.layers[size_t(i)];
      const Value& in = values[l.input];
      const Value& out = values[l.output];
      switch (l.kind) {
        case LayerKind::Conv: {
          if (stem_fused && i == 0) {  // conv + ReLU + max-pool, straight into the pool's output
            add(l.name + " + " + net.layers[1].name + " (fused)", 0, [this, n] {
              launch_fused_stem(input.get(), n, h, w, *fused_stem, static_cast<__half*>(values[net.layers[1].output].ptr),
                                stream);
            });
            break;
          }
          const Conv* c = convs[next_conv++].get();
          if (is_branch(i)) {
            add(l.name, i, [this, c] { run_conv(*c, concurrent ? side_workspace.get() : workspace.get()); });
            steps.back().branch = true;
          } else {
            add(l.name, i, [this, c] { run_conv(*c, workspace.get()); });
          }
          break;
        }
        case LayerKind::MaxPool:
          if (stem_fused) break;  // done by the fused stem (check_structure: the only max-pool is the stem's)
          add(l.name, i, [this, &l, &in, &out, n] {
            launch_max_pool(static_cast<const float*>(in.ptr), n, in.shape.h, in.shape.w, in.shape.c, l.kernel, l.stride,
                            l.pad, static_cast<__half*>(out.ptr), stream);
          });
          break;
        case LayerKind::GlobalAvgPool: break;  // with the classifier: run_head
        case LayerKind::FullyConnected:
          add(net.layers[size_t(i) - 1].name + " + " + l.name + (head_fused ? " (fused)" : ""), i - 1,
              [this] { run_head(head_fused); });
          break;
      }
    }
  }

  // Layer i may run beside layer i + 1: it is a convolution reading the same input as the convolution that
  // follows it, and its output is read only as a later layer's residual (a downsample projection). Running it
  // concurrently is safe with the buffer plan (assign_pool): its output and the next convolution's are both live
  // at the next convolution, so they have different buffers, and the shared input is released only after the next
  // convolution, when the two streams have joined.
  bool is_branch(int i) const {
    const auto& L = net.layers;
    if (i == 0 || size_t(i) + 1 >= L.size() || L[size_t(i)].kind != LayerKind::Conv) return false;
    const Layer& l = L[size_t(i)];
    const Layer& next = L[size_t(i) + 1];
    if (next.kind != LayerKind::Conv || next.input != l.input || next.residual == l.output) return false;
    for (size_t j = size_t(i) + 1; j < L.size(); ++j) {
      if (L[j].input == l.output) return false;
    }
    return true;
  }

  // The side stream, its events and its workspace, where there are branches to run on it.
  void prepare_branches() {
    size_t bytes = 0;
    for (const auto& c : convs) {
      if (!is_branch(int(c->layer - net.layers.data()))) continue;
      ++report.branch_convs;
      bytes = std::max({bytes, c->workspace, c->trial_workspace});
    }
    report.branches = kBranchesSerial;
    if (report.branch_convs == 0 || opt.branches == BranchMode::Serial) return;
    side_stream = make_stream();
    fork_event = make_event(cudaEventDisableTiming);
    join_event = make_event(cudaEventDisableTiming);
    side_workspace = DeviceBuffer<uint8_t>(bytes);
    report.workspace_bytes += bytes;
    concurrent = opt.branches == BranchMode::Concurrent;
    if (concurrent) report.branches = kBranchesConcurrent;
  }

  // The forward pass, eagerly or under capture: a branch step is forked onto the side stream (with the cuDNN
  // handle moved there for its call) and joined back after the step that follows it.
  void run_steps() {
    bool joining = false;
    for (auto& step : steps) {
      if (step.branch && concurrent) {
        CUDA_CHECK(cudaEventRecord(fork_event, stream));
        CUDA_CHECK(cudaStreamWaitEvent(side_stream, fork_event, 0));
        CUDNN_CHECK(cudnnSetStream(handle, side_stream));
        try {
          step.run();
        } catch (...) {
          cudnnSetStream(handle, stream);
          throw;
        }
        CUDNN_CHECK(cudnnSetStream(handle, stream));
        CUDA_CHECK(cudaEventRecord(join_event, side_stream));
        joining = true;
        continue;
      }
      step.run();
      if (joining) {
        CUDA_CHECK(cudaStreamWaitEvent(stream, join_event, 0));
        joining = false;
      }
    }
    if (joining) CUDA_CHECK(cudaStreamWaitEvent(stream, join_event, 0));
  }

  // Captures the forward pass (serial or concurrent); with BranchMode::Auto both, timed as whole graph replays,
  // and keeps the faster.
  void choose_branches() {
    if (!opt.cuda_graph) return;
    const bool time_both = opt.branches == BranchMode::Auto && report.branch_convs > 0 && opt.autotune;
    if (!time_both) {
      capture();
      return;
    }
    concurrent = false;
    capture();
    report.serial_ms = float(time_graph());
    CudaGraph serial_graph = std::move(graph);
    CudaGraphExec serial_exec = std::move(graph_exec);
    concurrent = true;
    capture();
    report.concurrent_ms = float(time_graph());
    if (report.serial_ms <= report.concurrent_ms) {
      concurrent = false;
      graph = std::move(serial_graph);
      graph_exec = std::move(serial_exec);
    }
    report.branches = concurrent ? kBranchesConcurrent : kBranchesSerial;
  }

  // Median milliseconds of one replay of graph_exec: calls per loop sized to about 5 ms (at most 20).
  double time_graph() {
    const auto replay = [this] { CUDA_CHECK(cudaGraphLaunch(graph_exec, stream)); };
    const double one = median_gpu_ms(stream, replay, 2, 1);
    const int calls = std::clamp(int(5.0 / std::max(one, 0.001)), 1, 20);
    return median_gpu_ms(stream, replay, 1, 7, calls);
  }

  // Each step alone, replayed in a CUDA graph of as many copies as make about 2 ms (at most 200): the GPU's time
  // for the step in a graph, without the host's launch overhead.
  std::vector<StepTime> time_steps(int loops) {
    CUDA_CHECK(cudaSetDevice(opt.device));
    std::vector<StepTime> out;
    for (auto& step : steps) {
      out.push_back(step.info);
      out.back().ms = median_replayed_ms(stream, step.run, loops, 2.0, 200);
    }
    return out;
  }

  void capture() {
    cudaGraph_t g;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      run_steps();
    } catch (...) {
      cudaStreamEndCapture(stream, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    graph = CudaGraph(g);
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    graph_exec = CudaGraphExec(exec);
  }

  void enqueue() {
    CUDA_CHECK(cudaSetDevice(opt.device));
    if (graph_exec.get()) {
      CUDA_CHECK(cudaGraphLaunch(graph_exec, stream));
    } else {
      run_steps();
    }
  }
};

CudnnEngine::CudnnEngine(const Network& network, int height, int width, const CudnnEngineOptions& options)
    : impl_(std::make_unique<Impl>(network, height, width, options)) {}
CudnnEngine::~CudnnEngine() = default;

int CudnnEngine::batch() const { return impl_->opt.batch; }
int CudnnEngine::height() const { return impl_->h; }
int CudnnEngine::width() const { return impl_->w; }
int CudnnEngine::input_channels() const { return impl_->net.input_channels; }
int CudnnEngine::num_classes() const { return impl_->net.num_classes; }
cudaStream_t CudnnEngine::stream() const { return impl_->stream; }
__half* CudnnEngine::input() const { return impl_->input.get(); }
const float* CudnnEngine::logits() const { return impl_->logits.get(); }
const EngineReport& CudnnEngine::report() const { return impl_->report; }
std::vector<StepTime> CudnnEngine::time_steps(int loops) { return impl_->time_steps(loops); }
void CudnnEngine::enqueue() { impl_->enqueue(); }

std::vector<float> CudnnEngine::run(const uint16_t* host_input) {
  auto& m = *impl_;
  CUDA_CHECK(cudaMemcpyAsync(m.input.get(), host_input, m.input.bytes(), cudaMemcpyHostToDevice, m.stream));
  m.enqueue();
  std::vector<float> out(m.logits.size());
  CUDA_CHECK(cudaMemcpyAsync(out.data(), m.logits.get(), m.logits.bytes(), cudaMemcpyDeviceToHost, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  return out;
}

std::vector<float> CudnnEngine::read_value(int id) {
  auto& m = *impl_;
  if (id == m.net.layers.back().output) {
    std::vector<float> out(m.logits.size());
    CUDA_CHECK(cudaMemcpy(out.data(), m.logits.get(), m.logits.bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
  const Value& v = m.values.at(id);
  if (v.absent && id == m.net.layers[0].output) {
    throw InternalError(fmt::format("read_value({}): {}'s output is never materialized by the fused stem kernel "
                                    "(it computes conv + ReLU + max-pool in one pass); read the max-pool's output, "
                                    "value {}, or set fused_stem = false", id, m.net.layers[0].name,
                                    m.net.layers[1].output));
  }
  if (v.absent) {
    throw InternalError(fmt::format("read_value({}): the pooled features are never written by the fused pool + "
                                    "classifier kernel; set head = HeadMode::Separate", id));
  }
  if (id != 0 && !m.opt.keep_all_values) throw InternalError("read_value needs keep_all_values");
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  const size_t count = size_t(m.opt.batch) * v.shape.elements();
  std::vector<float> out(count);
  if (v.fp32) {
    CUDA_CHECK(cudaMemcpy(out.data(), v.ptr, count * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<uint16_t> h(count);
    CUDA_CHECK(cudaMemcpy(h.data(), v.ptr, count * 2, cudaMemcpyDeviceToHost));
    std::transform(h.begin(), h.end(), out.begin(), half_to_float);
  }
  return out;
}

}  // namespace vc::inference
