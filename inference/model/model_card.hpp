// What a model file says about how it wants its input: the preprocessing it was trained with, its labels and
// its architecture, stored as strings in the safetensors `__metadata__` (written by tools/export_model.py and
// tools/train_default_model.py). The app uses them unless the configuration sets a key explicitly.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vc::inference {

struct ModelCard {
  std::optional<int> input_size;              // "input_size": "224"
  std::optional<std::string> resize;          // "resize": "crop" | "letterbox" | "stretch"
  std::optional<double> crop_ratio;           // "crop_ratio": "0.875"
  std::optional<std::array<double, 3>> mean;  // "mean": "[0.485, 0.456, 0.406]"
  std::optional<std::array<double, 3>> std;   // "std": "[0.229, 0.224, 0.225]"
  std::vector<std::string> labels;            // "labels": "[\"T-shirt/top\", …]" (JSON), empty = none
  std::optional<std::string> architecture;    // "architecture": "resnet18"
};

// Reads the card from safetensors metadata. Throws vc::DataError naming `origin` and the key when a value is
// malformed; keys it does not know are ignored.
ModelCard read_model_card(const std::map<std::string, std::string>& metadata, const std::string& origin);

// The metadata entries for a card (the inverse of read_model_card), for tools and tests.
std::map<std::string, std::string> model_card_metadata(const ModelCard& card);

}  // namespace vc::inference
