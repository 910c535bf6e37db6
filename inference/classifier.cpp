#include "inference/classifier.hpp"

#include <thread>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "inference/model/resnet.hpp"
#include "inference/model/safetensors.hpp"

namespace vc::inference {
namespace {

class CpuClassifier final : public Classifier {
 public:
  CpuClassifier(LoadedModel model, PreprocessParams params, int threads, int batch)
      : engine_(std::move(model.network), threads), threads_(threads), batch_(batch) {
    labels_ = std::move(model.labels);
    architecture_ = engine_.network().architecture;
    params_ = params;
  }
  std::string engine_name() const override {
    return fmt::format("CPU reference ({} threads)", threads_ > 0 ? threads_ : int(std::thread::hardware_concurrency()));
  }
  int max_batch() const override { return batch_; }
  std::vector<std::vector<float>> classify(std::span<const FrameView> frames) override {
    const int n = int(frames.size()), s = params_.size, c = params_.channels;
    std::vector<uint16_t> input(size_t(n) * s * s * c);
    for (int i = 0; i < n; ++i) preprocess_cpu(frames[i], params_, input.data() + size_t(i) * s * s * c);
    const auto logits = engine_.forward(input, n, s, s);
    const size_t k = size_t(engine_.network().num_classes);
    std::vector<std::vector<float>> out(n);
    for (int i = 0; i < n; ++i) out[i].assign(logits.begin() + long(i * k), logits.begin() + long((i + 1) * k));
    return out;
  }

 private:
  CpuEngine engine_;
  int threads_;
  int batch_;
};

}  // namespace

PreprocessParams preprocess_params(const config::Model& m) {
  PreprocessParams p;
  p.size = m.input_size;
  p.mode = parse_resize_mode(m.resize);
  p.crop_ratio = float(m.crop_ratio);
  for (int i = 0; i < 3; ++i) {
    p.mean[i] = float(m.mean[i]);
    p.std[i] = float(m.std[i]);
  }
  return p;
}

LoadedModel load_model(const config::Model& m) {
  auto log = vc::log::get("model");
  const auto file = SafetensorsFile::open(m.weights);
  LoadedModel model{build_resnet(file, m.architecture, m.bn_eps), {}};
  if (!m.labels.empty()) {
    model.labels = load_labels(m.labels);
    if (int(model.labels.size()) != model.network.num_classes) {
      throw DataError(fmt::format("{} has {} labels but {} has {} classes", m.labels, model.labels.size(), m.weights,
                                  model.network.num_classes));
    }
  }
  log->info("{}: {} ({} classes, {:.2f} GMAC per {}x{} frame)", m.weights, model.network.architecture,
            model.network.num_classes, model.network.macs(m.input_size, m.input_size) / 1e9, m.input_size, m.input_size);
  return model;
}

std::unique_ptr<Classifier> make_cuda_classifier(LoadedModel model, const config::Config& config);  // cuda_classifier.cpp

std::unique_ptr<Classifier> Classifier::create(const config::Config& config) {
  auto log = vc::log::get("inference");
  std::string device = config.inference.device;
  if (device != "cpu") {
    const auto gpus = probe_gpus();
    const bool usable = int(gpus.devices.size()) > config.inference.gpu_id && gpus.cudnn_problems.empty();
    if (!usable) {
      const std::string why = gpus.devices.empty() ? gpus.cuda_error
                              : !gpus.cudnn_problems.empty()
                                  ? gpus.cudnn_problems.front()
                                  : fmt::format("inference.gpu_id {} but {} GPU(s)", config.inference.gpu_id, gpus.devices.size());
      if (device == "cuda") throw UnavailableError("inference.device is cuda but no GPU is usable: " + why);
      log->warn("no usable GPU ({}): using the CPU reference engine, which is much slower", why);
      device = "cpu";
    } else {
      device = "cuda";
    }
  }
  auto model = load_model(config.model);
  std::unique_ptr<Classifier> classifier;
  if (device == "cuda") {
    classifier = make_cuda_classifier(std::move(model), config);
  } else {
    classifier = std::make_unique<CpuClassifier>(std::move(model), inference::preprocess_params(config.model),
                                                 config.inference.cpu_threads, config.inference.batch_size);
  }
  log->info("engine: {}", classifier->engine_name());
  return classifier;
}

}  // namespace vc::inference
