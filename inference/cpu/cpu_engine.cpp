#include "inference/cpu/cpu_engine.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/cpu/cpu_ops.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {

CpuEngine::CpuEngine(Network network, int threads) : network_(std::move(network)), threads_(threads) {}

std::vector<float> CpuEngine::forward(std::span<const uint16_t> input_fp16, int n, int h, int w) const {
  std::vector<float> input(input_fp16.size());
  for (size_t i = 0; i < input.size(); ++i) input[i] = half_to_float(input_fp16[i]);
  return forward(input, n, h, w);
}

std::vector<float> CpuEngine::forward(std::span<const float> input, int n, int h, int w) const {
  return std::move(run(input, n, h, w, false).back());
}

std::vector<std::vector<float>> CpuEngine::forward_all(std::span<const float> input, int n, int h, int w) const {
  return run(input, n, h, w, true);
}

std::vector<std::vector<float>> CpuEngine::run(std::span<const float> input, int n, int h, int w,
                                               bool keep_all) const {
  const auto shapes = network_.value_shapes(h, w);
  if (n <= 0 || input.size() != size_t(n) * size_t(shapes[0].elements())) {
    throw DataError(fmt::format("CPU engine: input has {} values, expected {} images of {}x{}x{} = {}", input.size(), n,
                                h, w, network_.input_channels, size_t(n) * size_t(shapes[0].elements())));
  }
  // Free each value after its last reader unless all are kept.
  const std::vector<int> last_use = network_.last_uses();
  std::vector<std::vector<float>> values(network_.num_values);
  values[0].assign(input.begin(), input.end());
  for (int i = 0; i < int(network_.layers.size()); ++i) {
    if (interrupt_ && interrupt_->load()) throw Interrupted("the forward pass was stopped (the run is stopping)");
    const Layer& l = network_.layers[i];
    const Shape& is = shapes[l.input];
    auto& out = values[l.output];
    out.resize(size_t(n) * size_t(shapes[l.output].elements()));
    const float* in = values[l.input].data();
    switch (l.kind) {
      case LayerKind::Conv:
        cpu::conv2d(in, n, is, l, l.residual >= 0 ? values[l.residual].data() : nullptr, out.data(), threads_);
        break;
      case LayerKind::MaxPool: cpu::max_pool(in, n, is, l, out.data(), threads_); break;
      case LayerKind::GlobalAvgPool: cpu::global_avg_pool(in, n, is, out.data()); break;
      case LayerKind::FullyConnected: cpu::fully_connected(in, n, l, out.data()); break;
    }
    if (!keep_all) {
      for (int v : {l.input, l.residual}) {
        if (v >= 0 && last_use[v] == i) std::vector<float>().swap(values[v]);
      }
    }
  }
  return values;
}

}  // namespace vc::inference
