#include "inference/model/network.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::inference {

std::vector<Shape> Network::value_shapes(int h, int w) const {
  std::vector<Shape> shapes(num_values);
  shapes[0] = {h, w, input_channels};
  for (const auto& l : layers) {
    const Shape in = shapes[l.input];
    Shape out;
    switch (l.kind) {
      case LayerKind::Conv:
      case LayerKind::MaxPool:
        out = {(in.h + 2 * l.pad - l.kernel) / l.stride + 1, (in.w + 2 * l.pad - l.kernel) / l.stride + 1,
               l.kind == LayerKind::Conv ? l.out_channels : in.c};
        if (in.h + 2 * l.pad < l.kernel || in.w + 2 * l.pad < l.kernel) {
          throw DataError(fmt::format("input {}x{} is too small for {} ({}x{} input)", h, w, l.name, in.h, in.w));
        }
        break;
      case LayerKind::GlobalAvgPool: out = {1, 1, in.c}; break;
      case LayerKind::FullyConnected: out = {1, 1, l.out_channels}; break;
    }
    shapes[l.output] = out;
  }
  return shapes;
}

double Network::macs(int h, int w) const {
  const auto shapes = value_shapes(h, w);
  double total = 0;
  for (const auto& l : layers) {
    const Shape& out = shapes[l.output];
    if (l.kind == LayerKind::Conv) {
      total += double(out.h) * out.w * l.out_channels * l.kernel * l.kernel * (l.in_channels / l.groups);
    } else if (l.kind == LayerKind::FullyConnected) {
      total += double(l.in_channels) * l.out_channels;
    }
  }
  return total;
}

std::vector<int> Network::last_uses() const {
  std::vector<int> last(size_t(num_values), -1);
  for (int i = 0; i < int(layers.size()); ++i) {
    last[size_t(layers[i].input)] = i;
    if (layers[i].residual >= 0) last[size_t(layers[i].residual)] = i;
  }
  return last;
}

}  // namespace vc::inference
