// The inference graph both engines execute: a list of layers over numbered values (value 0 is the input),
// with BatchNorm already folded into the convolutions. Built from a ResNet by build_resnet (resnet.hpp).
#pragma once
#include <string>
#include <vector>

namespace vc::inference {

enum class LayerKind { Conv, MaxPool, GlobalAvgPool, FullyConnected };

struct Layer {
  LayerKind kind = LayerKind::Conv;
  std::string name;     // torchvision-style, e.g. "layer1.0.conv1", "fc"
  int input = 0;        // value read
  int output = 0;       // value written (each layer writes a new value)
  int residual = -1;    // Conv: value added before the ReLU, -1 = none
  bool relu = false;    // Conv: ReLU at the end
  // Conv: weights OHWI ([out][kh][kw][in/groups]); FullyConnected: [out][in]. MaxPool: kernel/stride/pad.
  int in_channels = 0, out_channels = 0, kernel = 1, stride = 1, pad = 0, groups = 1;
  std::vector<float> weight, bias;
};

struct Shape {  // NHWC, batch not included
  int h = 0, w = 0, c = 0;
  [[nodiscard]] long elements() const { return long(h) * w * c; }
  bool operator==(const Shape&) const = default;
};

struct Network {
  std::string architecture;  // e.g. "resnet50" or a description of a custom ResNet
  int input_channels = 3;
  int num_classes = 0;
  std::vector<Layer> layers;
  int num_values = 1;        // values are 0 .. num_values-1; the last layer's output is the logits

  // The shape of every value for an input of h x w (throws vc::DataError if the input is too small).
  [[nodiscard]] std::vector<Shape> value_shapes(int h, int w) const;
  // Multiply-accumulates of one image at h x w.
  [[nodiscard]] double macs(int h, int w) const;
  // For every value, the index of the last layer that reads it (as input or residual); -1 if none does.
  // Engines free or reuse a value's memory after that layer.
  [[nodiscard]] std::vector<int> last_uses() const;
};

}  // namespace vc::inference
