#include "inference/cuda/diagnose.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "config/errors.hpp"
#include "inference/cpu/cpu_ops.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"

namespace vc::inference {
namespace {

// The bounds of the engine's own tests (gpu_test_engine.cpp): FP32 layers at FP32 level, the FP16 body at
// FP16 level, the max-pool an exact max rounded to FP16.
constexpr double kFp32Bound = 2e-5, kFp16Bound = 1e-2, kMaxPoolBound = 5e-4;

bool non_finite(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
}

using cpu::relative_error;

CudnnEngineOptions engine_options(const DiagnoseOptions& o) {
  CudnnEngineOptions e;
  e.batch = 1;
  e.device = o.device;
  e.cache_path = o.cache_path;
  e.keep_all_values = true;
  e.fused_stem = false;  // its conv output would not exist
  e.head = HeadMode::Separate;
  e.cuda_graph = false;
  return e;
}

// Layer `index` of the engine's last run against the CPU layer applied to the GPU's own input.
LayerCheck check_layer(CudnnEngine& engine, const Network& net, size_t index,
                       const std::vector<Shape>& shapes) {
  const Layer& l = net.layers[index];
  LayerCheck c;
  c.name = l.name;
  c.api = "kernel";
  c.math = "fp32";
  const auto in = engine.read_value(l.input);
  const auto got = engine.read_value(l.output);
  std::vector<float> want(got.size());
  switch (l.kind) {
    case LayerKind::Conv: {
      c.kind = "conv";
      const auto res = l.residual >= 0 ? engine.read_value(l.residual) : std::vector<float>();
      cpu::conv2d(in.data(), 1, shapes[l.input], l, res.empty() ? nullptr : res.data(), want.data(), 0);
      c.bound = l.input == 0 ? kFp32Bound : kFp16Bound;
      const auto& convs = engine.report().convs;
      const auto it =
          std::find_if(convs.begin(), convs.end(), [&](const ConvChoice& x) { return x.layer == l.name; });
      if (it != convs.end()) {
        c.api = it->api;
        c.math = it->math;
        c.algorithm = it->algorithm;
      }
      break;
    }
    case LayerKind::MaxPool:
      c.kind = "max-pool";
      cpu::max_pool(in.data(), 1, shapes[l.input], l, want.data(), 0);
      c.bound = kMaxPoolBound;
      break;
    case LayerKind::GlobalAvgPool:
      c.kind = "avg-pool";
      cpu::global_avg_pool(in.data(), 1, shapes[l.input], want.data());
      c.bound = kFp32Bound;
      break;
    case LayerKind::FullyConnected:
      c.kind = "fc";
      cpu::fully_connected(in.data(), 1, l, want.data());
      c.bound = kFp32Bound;
      break;
  }
  c.error = relative_error(got, want);
  c.non_finite = non_finite(got);
  return c;
}

std::vector<LayerCheck> check_all(CudnnEngine& engine, const Network& net, const std::vector<Shape>& shapes) {
  std::vector<LayerCheck> checks;
  for (size_t i = 0; i < net.layers.size(); ++i) checks.push_back(check_layer(engine, net, i, shapes));
  return checks;
}

std::string describe(const LayerCheck& c) {
  return c.non_finite ? "non-finite output" : fmt::format("error {:.3g} (bound {:.0e})", c.error, c.bound);
}

}  // namespace

const char* fault_name(Fault fault) {
  switch (fault) {
    case Fault::None:
      return "none";
    case Fault::Algorithm:
      return "algorithm";
    case Fault::Data:
      return "data";
    case Fault::Undetermined:
      return "undetermined";
  }
  return "?";
}

Diagnosis diagnose(const Network& net, int height, int width, const std::vector<uint16_t>& image,
                   const DiagnoseOptions& options) {
  const auto shapes = net.value_shapes(height, width);
  if (image.size() != size_t(shapes[0].elements())) {
    throw DataError(fmt::format("diagnose: the image has {} values, {}x{}x{} needs {}", image.size(), height,
                                width, net.input_channels, shapes[0].elements()));
  }
  Diagnosis d;
  CudnnEngine engine(net, height, width, engine_options(options));
  d.gpu = engine.report().gpu;
  (void)engine.run(image.data());
  d.layers = check_all(engine, net, shapes);
  const auto bad =
      std::find_if(d.layers.begin(), d.layers.end(), [](const LayerCheck& c) { return !c.ok(); });
  if (bad == d.layers.end()) {
    d.verdict = fmt::format("all {} layers are finite and within their bounds", d.layers.size());
    return d;
  }
  d.first_bad = int(bad - d.layers.begin());
  const Layer& layer = net.layers[size_t(d.first_bad)];
  d.weights_non_finite = non_finite(layer.weight) || non_finite(layer.bias);
  d.input_non_finite = non_finite(engine.read_value(layer.input));
  if (layer.kind == LayerKind::Conv) {
    // The same network with only this layer on the safe choice; the layer is judged on its own input again.
    CudnnEngineOptions o = engine_options(options);
    o.safe_layers = {layer.name};
    CudnnEngine safe(net, height, width, o);
    (void)safe.run(image.data());
    d.rerun = true;
    d.safe = check_layer(safe, net, size_t(d.first_bad), shapes);
    d.fault = d.safe.ok() ? Fault::Algorithm : Fault::Data;
  } else {
    d.fault = d.weights_non_finite || d.input_non_finite ? Fault::Data : Fault::Undetermined;
  }
  const std::string source = d.weights_non_finite ? "its weights hold NaN/Inf"
                             : d.input_non_finite ? "its input holds NaN/Inf"
                                                  : "weights and input are finite";
  switch (d.fault) {
    case Fault::Algorithm:
      d.verdict = fmt::format(
          "{} ({} {} algorithm {}): {}; with the safe choice ({} algorithm {}, {}) it is right: "
          "an algorithm fault",
          layer.name, bad->api, bad->math, bad->algorithm, describe(*bad), d.safe.api, d.safe.algorithm,
          d.safe.math);
      break;
    case Fault::Data:
      d.verdict =
          fmt::format("{}: {}{}; {}: a data fault", layer.name, describe(*bad),
                      d.rerun ? ", also with the safe choice (" + describe(d.safe) + ")" : "", source);
      break;
    default:
      d.verdict = fmt::format("{}: {}; {}, and this layer has no second implementation to compare with",
                              layer.name, describe(*bad), source);
      break;
  }
  return d;
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string out = fmt::format("{:<20} {:<9} {:<7} {:<15} {:>5} {:>10} {:>8}  {}\n", "layer", "kind", "api",
                                "math", "algo", "error", "bound", "status");
  for (size_t i = 0; i < d.layers.size(); ++i) {
    const auto& c = d.layers[i];
    out += fmt::format("{:<20} {:<9} {:<7} {:<15} {:>5} {:>10.3g} {:>8.0e}  {}{}\n", c.name, c.kind, c.api,
                       c.math, c.algorithm, c.error, c.bound,
                       c.non_finite ? "NON-FINITE"
                       : c.ok()     ? "ok"
                                    : "BEYOND BOUND",
                       int(i) == d.first_bad ? "  <- first" : "");
  }
  return out + fmt::format("fault: {}. {}\n", fault_name(d.fault), d.verdict);
}

}  // namespace vc::inference
