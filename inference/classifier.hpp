// The public face of inference: a Classifier made from the configuration turns a batch of frames into logits.
// It owns the model, the labels and an engine — cuDNN on the GPU, or the CPU reference — chosen by
// inference.device (auto: the GPU when one is usable, else the CPU; the choice is logged).
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "inference/model/network.hpp"
#include "inference/preprocess.hpp"

namespace vc::inference {

class Classifier {
 public:
  virtual ~Classifier() = default;

  // Loads weights and labels, builds the engine. Throws NoInputError/DataError/ConfigError/UnavailableError.
  static std::unique_ptr<Classifier> create(const config::Config& config);

  // "cuDNN on NVIDIA H200" / "CPU reference (2 threads)".
  [[nodiscard]] virtual std::string engine_name() const = 0;
  [[nodiscard]] virtual int max_batch() const = 0;
  // Logits (num_classes each) for up to max_batch() frames in host memory.
  virtual std::vector<std::vector<float>> classify(std::span<const FrameView> frames) = 0;

  [[nodiscard]] const std::vector<std::string>& labels() const { return labels_; }
  [[nodiscard]] const std::string& architecture() const { return architecture_; }
  [[nodiscard]] const PreprocessParams& preprocess_params() const { return params_; }

 protected:
  std::vector<std::string> labels_;
  std::string architecture_;
  PreprocessParams params_;
};

// The preprocessing parameters the configuration asks for (channels left at 3).
PreprocessParams preprocess_params(const config::Model& model);

// Loads weights (and checks labels against the class count): shared by both engines.
struct LoadedModel {
  Network network;
  std::vector<std::string> labels;
};
LoadedModel load_model(const config::Model& model);

}  // namespace vc::inference
