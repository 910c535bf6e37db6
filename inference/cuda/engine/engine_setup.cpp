// The cuDNN engine's plan building: see engine_impl.hpp.
#include <algorithm>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/engine/engine_impl.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {

CudnnEngine::Impl::Impl(const Network& network, int height, int width, const CudnnEngineOptions& options)
    : net(network), opt(options), h(height), w(width) {
  const auto t0 = EngineClock::now();
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
  if (opt.autotune && !opt.quick) keep_plans();
  size_workspaces();
  choose_branches();
  // Built on low-priority streams (above); it runs on high-priority ones. (Everything reads `stream` when it runs,
  // the CUDA graph takes the priority of the stream it is launched into, the cuDNN handle is told.)
  CUDA_CHECK(cudaStreamSynchronize(stream));
  stream = make_stream(StreamPriority::kLive);
  CUDNN_CHECK(cudnnSetStream(handle, stream));
  if (side_stream.get()) {
    CUDA_CHECK(cudaStreamSynchronize(side_stream));
    side_stream = make_stream(StreamPriority::kLive);
  }
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
  if (report.plans_loaded + report.plans_compiled > 0) {
    log->info("graph plans: {} loaded compiled from {}, {} compiled by cuDNN", report.plans_loaded,
              plan_cache->folder().empty() ? "(no cache)" : plan_cache->folder(), report.plans_compiled);
  }
  if (report.untuned_layers > 0) {
    log->info("started untuned: {} of {} convolution(s) run cuDNN's heuristic choice until they are tuned",
              report.untuned_layers, convs.size());
  }
  if (report.cache_misses > 0) {
    log->info("tuning {:.2f} s ({:.2f} s compiling graph plans, {} thread(s)); {} layer shape(s) with near-tied plans, "
              "{} of {} swaps kept on the whole forward pass ({:.4f} -> {:.4f} ms, {:.2f} s)",
              report.tuning_seconds, report.plan_build_seconds, report.compile_threads, report.tie_groups, report.tie_swaps, report.tie_trials,
              report.ties_before_ms, report.ties_after_ms, report.tie_seconds);
  }
}

void CudnnEngine::Impl::check_structure() const {
  const auto& L = net.layers;
  const bool ok = L.size() >= 4 && L[0].kind == LayerKind::Conv && L[0].input == 0 && L[1].kind == LayerKind::MaxPool &&
                  L[1].input == L[0].output && L[L.size() - 2].kind == LayerKind::GlobalAvgPool &&
                  L.back().kind == LayerKind::FullyConnected && L.back().input == L[L.size() - 2].output &&
                  std::all_of(L.begin() + 2, L.end() - 2, [](const Layer& l) { return l.kind == LayerKind::Conv; });
  if (!ok) throw InternalError("cuDNN engine: the network is not stem conv, max-pool, convolutions, pool, fc");
  if (opt.batch < 1) throw InternalError("cuDNN engine: batch must be >= 1");
}

void CudnnEngine::Impl::choose_stem() {
  report.stem_note = fused_stem_refusal();
  stem_fused = report.stem_note.empty();
  report.stem = stem_fused ? kStemFused : opt.tf32_stem ? kStemCudnnTf32 : kStemCudnnFp32;
}

std::string CudnnEngine::Impl::fused_stem_refusal() const {
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

template <typename T>
DeviceBuffer<T> CudnnEngine::Impl::upload(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  copy_to_device(d.get(), host.data(), host.size() * sizeof(T));
  report.weight_bytes += d.bytes();
  return d;
}

void CudnnEngine::Impl::plan_values() {
  const auto shapes = net.value_shapes(h, w);
  values.resize(net.num_values);
  for (int v = 0; v < net.num_values; ++v) values[v].shape = shapes[v];
  values[net.layers[0].output].fp32 = true;
  values[net.layers[net.layers.size() - 2].output].fp32 = true;
  values[net.layers.back().output].fp32 = true;
  if (stem_fused) values[net.layers[0].output].absent = true;
  for (const auto& v : values) report.naive_activation_bytes += v.bytes(opt.batch);
}

std::vector<int> CudnnEngine::Impl::assign_pool(int& pool_count, size_t& pool_bytes) const {
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

size_t CudnnEngine::Impl::planned_activation_bytes() const {
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

void CudnnEngine::Impl::check_memory() const {
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

void CudnnEngine::Impl::allocate_values() {
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

void CudnnEngine::Impl::set_tensor(TensorDesc& d, cudnnDataType_t type, int n, int c, int hh, int ww) {
  cudnnTensorDescriptor_t t;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&t));
  d = TensorDesc(t);
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NHWC, type, n, c, hh, ww));
}

std::unique_ptr<CudnnEngine::Impl::Conv> CudnnEngine::Impl::make_conv(const Layer& l) {
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

DeviceBuffer<uint8_t> CudnnEngine::Impl::to_device_bytes(const void* host, size_t bytes) {
  DeviceBuffer<uint8_t> d(bytes);
  copy_to_device(d.get(), host, bytes);
  report.weight_bytes += bytes;
  return d;
}

void CudnnEngine::Impl::size_workspaces() {
  size_t main = 0, side = 0;
  for (const auto& c : convs) {
    main = std::max(main, c->workspace);
    if (on_side_stream(*c)) side = std::max(side, c->workspace);
    c->trial_workspace = 0;
  }
  if (main < workspace.size()) workspace = DeviceBuffer<uint8_t>(main);
  if (side < side_workspace.size()) side_workspace = DeviceBuffer<uint8_t>(side);
  report.workspace_bytes = workspace.size() + side_workspace.size();
}

}  // namespace vc::inference
