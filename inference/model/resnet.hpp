// The ResNet family (torchvision/timm naming): architecture from the weights' tensor shapes, the check of an
// explicitly named architecture against them, and the inference graph with BatchNorm folded in.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inference/model/network.hpp"
#include "inference/model/safetensors.hpp"

namespace vc::inference {

using TensorShapes = std::map<std::string, std::vector<int64_t>>;

struct ResNetSpec {
  bool bottleneck = false;
  std::array<int, 4> blocks{2, 2, 2, 2};
  int groups = 1;
  int width_per_group = 64;  // torchvision's base_width
  int base_channels = 64;    // stem output channels = planes of layer1 (64 in every standard ResNet)
  int in_channels = 3;
  int num_classes = 1000;

  // "resnet50", "resnext50_32x4d", … or, for a non-standard net, a description of it.
  [[nodiscard]] std::string name() const;
  bool operator==(const ResNetSpec&) const = default;
};

// The standard architectures by torchvision name. Throws vc::ConfigError for an unknown name.
ResNetSpec named_resnet(const std::string& name, int num_classes);
std::vector<std::string> known_resnets();

// Infers the architecture from the tensor shapes. Throws vc::DataError (naming `origin`) when they are not a ResNet.
ResNetSpec infer_resnet(const TensorShapes& shapes, const std::string& origin);

// Every tensor a ResNet of this spec has (conv weights, BatchNorm parameters, fc), with its shape.
TensorShapes expected_tensors(const ResNetSpec& spec);

// Throws vc::DataError listing expected-vs-found shapes when `shapes` does not hold `spec`'s tensors.
void check_tensors(const ResNetSpec& spec, const TensorShapes& shapes, const std::string& origin);

// Loads a ResNet: `architecture` is "auto" or a name from known_resnets(). BatchNorm is folded with `bn_eps`.
Network build_resnet(const SafetensorsFile& file, const std::string& architecture = "auto", double bn_eps = 1e-5);

// Reads a labels file (one name per line, blank lines kept as errors). Throws NoInputError/DataError.
std::vector<std::string> load_labels(const std::string& path);

TensorShapes shapes_of(const SafetensorsFile& file);

// Random weights for a ResNet of this spec, with plausible BatchNorm statistics (He-initialized convs, the last
// BatchNorm of each block damped so activations stay in FP16 range): for tests and benchmarks.
std::vector<TensorToWrite> random_resnet_tensors(const ResNetSpec& spec, uint32_t seed);
// The same, built into a Network.
Network random_resnet(const ResNetSpec& spec, uint32_t seed);

}  // namespace vc::inference
