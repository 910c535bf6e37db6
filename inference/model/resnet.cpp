#include "inference/model/resnet.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::inference {
namespace {

struct Named {
  const char* name;
  bool bottleneck;
  std::array<int, 4> blocks;
  int groups, width_per_group;
};
constexpr Named kNamed[] = {
    {"resnet18", false, {2, 2, 2, 2}, 1, 64},        {"resnet34", false, {3, 4, 6, 3}, 1, 64},
    {"resnet50", true, {3, 4, 6, 3}, 1, 64},         {"resnet101", true, {3, 4, 23, 3}, 1, 64},
    {"resnet152", true, {3, 8, 36, 3}, 1, 64},       {"resnext50_32x4d", true, {3, 4, 6, 3}, 32, 4},
    {"resnext101_32x8d", true, {3, 4, 23, 3}, 32, 8}, {"resnext101_64x4d", true, {3, 4, 23, 3}, 64, 4},
    {"wide_resnet50_2", true, {3, 4, 6, 3}, 1, 128}, {"wide_resnet101_2", true, {3, 4, 23, 3}, 1, 128},
};

int expansion(const ResNetSpec& s) { return s.bottleneck ? 4 : 1; }
int planes(const ResNetSpec& s, int stage) { return s.base_channels << stage; }
int width(const ResNetSpec& s, int stage) {  // channels inside a bottleneck (torchvision's formula)
  return s.bottleneck ? int(planes(s, stage) * (s.width_per_group / 64.0)) * s.groups : planes(s, stage);
}
std::vector<int64_t> conv_shape(int out, int in, int k) { return {out, in, k, k}; }

void add_bn(TensorShapes& t, const std::string& prefix, int channels) {
  for (const char* p : {"weight", "bias", "running_mean", "running_var"}) t[prefix + "." + p] = {channels};
}

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

std::string ResNetSpec::name() const {
  for (const auto& n : kNamed) {
    if (n.bottleneck == bottleneck && n.blocks == blocks && n.groups == groups && n.width_per_group == width_per_group &&
        base_channels == 64 && in_channels == 3) {
      return n.name;
    }
  }
  return fmt::format("custom ResNet ({} blocks {}, groups {}, width/group {}, base {})",
                     bottleneck ? "bottleneck" : "basic", fmt::join(blocks, "-"), groups, width_per_group, base_channels);
}

std::vector<std::string> known_resnets() {
  std::vector<std::string> names;
  for (const auto& n : kNamed) names.emplace_back(n.name);
  return names;
}

ResNetSpec named_resnet(const std::string& name, int num_classes) {
  for (const auto& n : kNamed) {
    if (name == n.name) {
      ResNetSpec s;
      s.bottleneck = n.bottleneck;
      s.blocks = n.blocks;
      s.groups = n.groups;
      s.width_per_group = n.width_per_group;
      s.num_classes = num_classes;
      return s;
    }
  }
  throw ConfigError(fmt::format("model.architecture: unknown '{}' (known: auto, {})", name, fmt::join(known_resnets(), ", ")));
}

TensorShapes expected_tensors(const ResNetSpec& s) {
  TensorShapes t;
  t["conv1.weight"] = conv_shape(s.base_channels, s.in_channels, 7);
  add_bn(t, "bn1", s.base_channels);
  int inplanes = s.base_channels;
  for (int stage = 0; stage < 4; ++stage) {
    const int out = planes(s, stage) * expansion(s), w = width(s, stage);
    for (int i = 0; i < s.blocks[stage]; ++i) {
      const auto p = fmt::format("layer{}.{}.", stage + 1, i);
      if (s.bottleneck) {
        t[p + "conv1.weight"] = conv_shape(w, inplanes, 1);
        t[p + "conv2.weight"] = conv_shape(w, w / s.groups, 3);
        t[p + "conv3.weight"] = conv_shape(out, w, 1);
        add_bn(t, p + "bn1", w);
        add_bn(t, p + "bn2", w);
        add_bn(t, p + "bn3", out);
      } else {
        t[p + "conv1.weight"] = conv_shape(out, inplanes, 3);
        t[p + "conv2.weight"] = conv_shape(out, out, 3);
        add_bn(t, p + "bn1", out);
        add_bn(t, p + "bn2", out);
      }
      if (i == 0 && (stage > 0 || inplanes != out)) {
        t[p + "downsample.0.weight"] = conv_shape(out, inplanes, 1);
        add_bn(t, p + "downsample.1", out);
      }
      inplanes = out;
    }
  }
  t["fc.weight"] = {s.num_classes, inplanes};
  t["fc.bias"] = {s.num_classes};
  return t;
}

ResNetSpec infer_resnet(const TensorShapes& shapes, const std::string& origin) {
  auto fail = [&](const std::string& why) -> void {
    throw DataError(fmt::format("{}: not a torchvision/timm ResNet: {}", origin, why));
  };
  auto get = [&](const std::string& name, size_t rank) -> const std::vector<int64_t>& {
    auto it = shapes.find(name);
    if (it == shapes.end()) {
      if (name == "conv1.weight" && shapes.count("conv1.0.weight")) {
        fail("it has a deep stem (conv1.0, conv1.1, …: timm's resnet*d/resnet*s variants), which is not supported");
      }
      fail(fmt::format("tensor '{}' is missing", name));
    }
    if (it->second.size() != rank) fail(fmt::format("'{}' has shape {}, expected rank {}", name, shape_str(it->second), rank));
    return it->second;
  };
  ResNetSpec s;
  const auto& stem = get("conv1.weight", 4);
  s.base_channels = int(stem[0]);
  s.in_channels = int(stem[1]);
  if (stem[2] != 7 || stem[3] != 7) fail(fmt::format("conv1.weight is {}, expected a 7x7 stem", shape_str(stem)));
  s.bottleneck = shapes.count("layer1.0.conv3.weight") > 0;
  static const std::regex block(R"(layer([1-4])\.(\d+)\.conv1\.weight)");
  std::array<std::set<int>, 4> seen;
  for (const auto& [name, shape] : shapes) {
    std::smatch m;
    if (std::regex_match(name, m, block)) seen[std::stoi(m[1]) - 1].insert(std::stoi(m[2]));
  }
  for (int stage = 0; stage < 4; ++stage) {
    s.blocks[stage] = int(seen[stage].size());
    if (s.blocks[stage] == 0) fail(fmt::format("layer{} has no blocks", stage + 1));
  }
  const auto& conv2 = get("layer1.0.conv2.weight", 4);
  if (s.bottleneck) {
    if (conv2[1] <= 0 || conv2[0] % conv2[1] != 0) fail(fmt::format("layer1.0.conv2.weight has shape {}", shape_str(conv2)));
    s.groups = int(conv2[0] / conv2[1]);
    s.width_per_group = int(conv2[0] / s.groups * 64 / s.base_channels);
  }
  s.num_classes = int(get("fc.weight", 2)[0]);
  return s;
}

void check_tensors(const ResNetSpec& spec, const TensorShapes& shapes, const std::string& origin) {
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected_tensors(spec)) {
    auto it = shapes.find(name);
    if (it == shapes.end()) {
      problems.push_back(fmt::format("{}: expected {}, missing", name, shape_str(shape)));
    } else if (it->second != shape) {
      problems.push_back(fmt::format("{}: expected {}, found {}", name, shape_str(shape), shape_str(it->second)));
    }
  }
  if (problems.empty()) return;
  // Convolution/fc weights first (they say the most), each group in network order (layer3.6 before layer3.10).
  auto order_key = [](const std::string& p) {
    std::string key = p.find(".weight:") != std::string::npos && p.find("bn") == std::string::npos ? "0" : "1";
    for (size_t i = 0; i < p.size() && p[i] != ':';) {
      if (std::isdigit(static_cast<unsigned char>(p[i]))) {
        size_t j = i;
        while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) ++j;
        key += std::string(8 - std::min<size_t>(8, j - i), '0') + p.substr(i, j - i);
        i = j;
      } else {
        key += p[i++];
      }
    }
    return key;
  };
  std::sort(problems.begin(), problems.end(), [&](const auto& a, const auto& b) { return order_key(a) < order_key(b); });
  const size_t shown = std::min<size_t>(problems.size(), 8);
  throw DataError(fmt::format("{}: the weights do not match {}: {}{}", origin, spec.name(),
                              fmt::join(problems.begin(), problems.begin() + long(shown), "; "),
                              problems.size() > shown ? fmt::format("; … and {} more", problems.size() - shown) : ""));
}

TensorShapes shapes_of(const SafetensorsFile& file) {
  TensorShapes shapes;
  for (const auto& t : file.tensors()) shapes[t.name] = t.shape;
  return shapes;
}

Network build_resnet(const SafetensorsFile& file, const std::string& architecture, double bn_eps) {
  const auto shapes = shapes_of(file);
  ResNetSpec spec = infer_resnet(shapes, file.origin());
  if (architecture != "auto") {
    const ResNetSpec named = named_resnet(architecture, spec.num_classes);
    check_tensors(named, shapes, file.origin());
    spec = named;
  } else {
    check_tensors(spec, shapes, file.origin());
  }
  const auto expected = expected_tensors(spec);
  for (const auto& [name, shape] : shapes) {
    if (!expected.count(name) && name.find("num_batches_tracked") == std::string::npos) {
      vc::log::get("model")->warn("{}: ignoring unexpected tensor '{}' {}", file.origin(), name, shape_str(shape));
    }
  }

  Network net;
  net.architecture = spec.name();
  net.input_channels = spec.in_channels;
  net.num_classes = spec.num_classes;
  auto tensor = [&](const std::string& name) { return file.to_float(*file.find(name)); };

  // conv (OIHW) + BatchNorm -> one conv layer with OHWI weights and a bias.
  auto conv = [&](const std::string& conv_name, const std::string& bn_name, int input, int stride, int groups,
                  bool relu, int residual) {
    const auto& ws = shapes.at(conv_name + ".weight");
    Layer l;
    l.kind = LayerKind::Conv;
    l.name = conv_name;
    l.input = input;
    l.output = net.num_values++;
    l.residual = residual;
    l.relu = relu;
    l.out_channels = int(ws[0]);
    l.in_channels = int(ws[1]) * groups;
    l.kernel = int(ws[2]);
    l.stride = stride;
    l.pad = l.kernel / 2;
    l.groups = groups;
    const auto w = tensor(conv_name + ".weight");
    const auto gamma = tensor(bn_name + ".weight"), beta = tensor(bn_name + ".bias");
    const auto mean = tensor(bn_name + ".running_mean"), var = tensor(bn_name + ".running_var");
    const int cin = l.in_channels / groups, k = l.kernel;
    l.weight.resize(w.size());
    l.bias.resize(l.out_channels);
    for (int o = 0; o < l.out_channels; ++o) {
      if (!(var[o] >= 0)) throw DataError(fmt::format("{}: {}.running_var[{}] is {}", file.origin(), bn_name, o, var[o]));
      const double scale = gamma[o] / std::sqrt(double(var[o]) + bn_eps);
      l.bias[o] = float(beta[o] - mean[o] * scale);
      for (int i = 0; i < cin; ++i) {
        for (int y = 0; y < k; ++y) {
          for (int x = 0; x < k; ++x) {
            l.weight[((size_t(o) * k + y) * k + x) * cin + i] = float(w[((size_t(o) * cin + i) * k + y) * k + x] * scale);
          }
        }
      }
    }
    net.layers.push_back(std::move(l));
    return net.layers.back().output;
  };

  int x = conv("conv1", "bn1", 0, 2, 1, true, -1);
  Layer pool;
  pool.kind = LayerKind::MaxPool;
  pool.name = "maxpool";
  pool.input = x;
  pool.output = x = net.num_values++;
  pool.kernel = 3;
  pool.stride = 2;
  pool.pad = 1;
  net.layers.push_back(pool);

  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < spec.blocks[stage]; ++i) {
      const auto p = fmt::format("layer{}.{}.", stage + 1, i);
      const int stride = (stage > 0 && i == 0) ? 2 : 1;
      int identity = x;
      if (shapes.count(p + "downsample.0.weight")) {
        identity = conv(p + "downsample.0", p + "downsample.1", x, stride, 1, false, -1);
      }
      if (spec.bottleneck) {
        const int a = conv(p + "conv1", p + "bn1", x, 1, 1, true, -1);
        const int b = conv(p + "conv2", p + "bn2", a, stride, spec.groups, true, -1);
        x = conv(p + "conv3", p + "bn3", b, 1, 1, true, identity);
      } else {
        const int a = conv(p + "conv1", p + "bn1", x, stride, 1, true, -1);
        x = conv(p + "conv2", p + "bn2", a, 1, 1, true, identity);
      }
    }
  }
  Layer gap;
  gap.kind = LayerKind::GlobalAvgPool;
  gap.name = "avgpool";
  gap.input = x;
  gap.output = x = net.num_values++;
  net.layers.push_back(gap);

  Layer fc;
  fc.kind = LayerKind::FullyConnected;
  fc.name = "fc";
  fc.input = x;
  fc.output = net.num_values++;
  fc.in_channels = int(shapes.at("fc.weight")[1]);
  fc.out_channels = spec.num_classes;
  fc.weight = tensor("fc.weight");
  fc.bias = tensor("fc.bias");
  net.layers.push_back(std::move(fc));
  return net;
}

std::vector<TensorToWrite> random_resnet_tensors(const ResNetSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TensorToWrite> out;
  for (const auto& [name, shape] : expected_tensors(spec)) {
    TensorToWrite t{name, DType::F32, shape, {}};
    int64_t n = 1;
    for (auto d : shape) n *= d;
    t.values.resize(size_t(n));
    auto fill = [&](auto dist) {
      for (auto& v : t.values) v = float(dist(rng));
    };
    const auto ends_with = [&](const char* suffix) {
      const std::string s(suffix);
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    const bool last_bn = name.find(spec.bottleneck ? ".bn3." : ".bn2.") != std::string::npos;
    if (shape.size() == 4 || name == "fc.weight") {
      const double fan_in = double(n) / double(shape[0]);
      fill(std::normal_distribution<double>(0.0, std::sqrt(2.0 / fan_in)));
    } else if (ends_with(".weight")) {
      fill(std::uniform_real_distribution<double>(last_bn ? 0.1 : 0.5, last_bn ? 0.3 : 1.0));
    } else if (ends_with(".running_var")) {
      fill(std::uniform_real_distribution<double>(0.5, 1.5));
    } else {  // bias, running_mean
      fill(std::normal_distribution<double>(0.0, 0.1));
    }
    out.push_back(std::move(t));
  }
  return out;
}

Network random_resnet(const ResNetSpec& spec, uint32_t seed) {
  return build_resnet(SafetensorsFile::from_bytes(serialize_safetensors(random_resnet_tensors(spec, seed)), spec.name()));
}

std::vector<std::string> load_labels(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NoInputError(fmt::format("{}: cannot read labels file", path));
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();  // trailing blank lines
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) throw DataError(fmt::format("{}:{}: empty label", path, i + 1));
    if (config::invalid_utf8_at(labels[i]) != std::string_view::npos) {
      throw DataError(fmt::format("{}:{}: not UTF-8 text (save the labels file as UTF-8)", path, i + 1));
    }
  }
  if (labels.empty()) throw DataError(fmt::format("{}: no labels", path));
  return labels;
}

}  // namespace vc::inference
