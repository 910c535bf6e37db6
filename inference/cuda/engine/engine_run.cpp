// The cuDNN engine's execution, and its public calls: see engine_impl.hpp.
#include <algorithm>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/engine/engine_impl.hpp"
#include "inference/cuda/engine/engine_kernels.hpp"
#include "inference/cuda/engine/gpu_timer.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {

void CudnnEngine::Impl::run_head(bool fused) {
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

void CudnnEngine::Impl::run_conv(const Conv& c, void* ws) const {
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

void CudnnEngine::Impl::build_steps() {
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

bool CudnnEngine::Impl::is_branch(int i) const {
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

void CudnnEngine::Impl::prepare_branches() {
  size_t bytes = 0;
  for (const auto& c : convs) {
    if (!is_branch(*c)) continue;
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

void CudnnEngine::Impl::run_steps() {
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

double CudnnEngine::Impl::time_graph() {
  const auto replay = [this] { CUDA_CHECK(cudaGraphLaunch(graph_exec, stream)); };
  const double one = median_gpu_ms(stream, replay, 2, 1);
  const int calls = std::clamp(int(5.0 / std::max(one, 0.001)), 1, 20);
  return median_gpu_ms(stream, replay, 1, 7, calls);
}

std::vector<StepTime> CudnnEngine::Impl::time_steps(int loops) {
  CUDA_CHECK(cudaSetDevice(opt.device));
  std::vector<StepTime> out;
  for (auto& step : steps) {
    out.push_back(step.info);
    out.back().ms = median_replayed_ms(stream, step.run, loops, 2.0, 200);
  }
  return out;
}

void CudnnEngine::Impl::capture() {
  graph = capture_graph(stream, [this] { run_steps(); });
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  graph_exec = CudaGraphExec(exec);
}

void CudnnEngine::Impl::enqueue() {
  CUDA_CHECK(cudaSetDevice(opt.device));
  if (graph_exec.get()) {
    CUDA_CHECK(cudaGraphLaunch(graph_exec, stream));
  } else {
    run_steps();
  }
}

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

