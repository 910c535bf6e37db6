// The public face of inference: a Classifier made from the configuration turns batches of frames into logits.
// It owns the model, the labels and an engine — cuDNN on the GPU, or the CPU reference — chosen by
// inference.device (auto: the GPU when one is usable, else the CPU; the choice is logged). Classification is
// asynchronous: the pipeline submits batch N+1 while batch N still runs on the GPU.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "inference/model/network.hpp"
#include "inference/preprocess.hpp"

namespace vc::inference {

// The model settings in force and where each came from ("the configuration", "the model file", "default").
struct ModelSettings {
  config::Model model;                      // input_size, resize, crop_ratio, mean, std as used
  std::vector<std::string> labels;          // one per class, or empty ("class N")
  std::vector<std::string> provenance;      // lines such as "model.input_size = 128 (from the model file)"
  std::map<std::string, std::string> from_card;  // the keys the model file decided: path -> "model file WEIGHTS"
  bool random_weights = false;              // the file says its weights are random ("weights": "random")
};

// The model settings in force — the configuration merged with the model file's card — without building the
// network (for `video-classifier config`). Throws as load_model does for an unreadable file.
ModelSettings model_settings(const config::Config& config);
// The weights file `config` loads: model.weights, or the bundled model when that is empty.
std::string weights_file(const config::Config& config);

// What submit() throws once interrupt() has been called: the batch was cut short and has no logits.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Classifier {
 public:
  virtual ~Classifier() = default;

  // Loads weights and labels, builds the engine. Throws NoInputError/DataError/ConfigError/UnavailableError.
  static std::unique_ptr<Classifier> create(const config::Config& config);
  // One engine per inference.gpus entry (all: per GPU of the machine), or create()'s one. The first is built first,
  // so that the others start from the algorithms it tuned and cached; the others are built at once, in parallel.
  // Throws UnavailableError for a GPU the machine does not have.
  static std::vector<std::unique_ptr<Classifier>> create_all(const config::Config& config);

  // "cuDNN on NVIDIA H200" / "CPU reference (2 threads)".
  [[nodiscard]] virtual std::string engine_name() const = 0;
  [[nodiscard]] virtual int max_batch() const = 0;
  // How many submitted batches may be waiting for collect() at once.
  [[nodiscard]] virtual int max_in_flight() const = 0;
  // The CUDA device whose primary context the engine uses (decoders can share it); -1 for the CPU engine.
  [[nodiscard]] virtual int cuda_device() const { return -1; }

  // Starts classifying up to max_batch() frames (host or device memory, any mix of formats). The frames must
  // stay valid until their batch has been collected.
  virtual void submit(std::span<const FrameView> frames) = 0;
  // Waits for the oldest submitted batch and writes its logits (frames x num_classes(), row-major) to `logits`.
  virtual void collect(std::vector<float>& logits) = 0;
  // Whether the oldest submitted batch has finished: collect() would not wait. False when nothing was submitted.
  [[nodiscard]] virtual bool ready() = 0;
  // The run is stopping (Ctrl-C): a batch that takes seconds stops as soon as it can — the CPU engine between two
  // layers — and this and every later submit() throw Interrupted. The GPU engine's batches take milliseconds: they
  // finish. Callable from any thread.
  virtual void interrupt() {}
  // An engine that started untuned (inference.tune_in_background) gives what builds its tuned self: the same model
  // on the same GPU (seconds; called once, off the engine's thread; `cancel` set: it gives up within a layer's
  // tuning, throwing). Null when it is tuned already.
  using Tuner = std::function<std::unique_ptr<Classifier>(const std::atomic<bool>& cancel)>;
  [[nodiscard]] virtual Tuner tuner() const { return nullptr; }

  // submit + collect, one row per frame.
  std::vector<std::vector<float>> classify(std::span<const FrameView> frames);

  [[nodiscard]] int num_classes() const { return num_classes_; }
  [[nodiscard]] const std::vector<std::string>& labels() const { return settings_.labels; }
  [[nodiscard]] const std::string& architecture() const { return architecture_; }
  [[nodiscard]] const PreprocessParams& preprocess_params() const { return params_; }
  [[nodiscard]] const ModelSettings& settings() const { return settings_; }

 protected:
  ModelSettings settings_;
  std::string architecture_;
  PreprocessParams params_;
  int num_classes_ = 0;
};

// The preprocessing parameters of a model section (channels left at 3).
PreprocessParams preprocess_params(const config::Model& model);

// Loads the weights (NaN/Inf rejected, naming the tensor), reads the model file's card and merges it with the
// configuration: a key set explicitly in the configuration wins, then the model file, then the default.
struct LoadedModel {
  Network network;
  ModelSettings settings;
};
LoadedModel load_model(const config::Config& config);

}  // namespace vc::inference
