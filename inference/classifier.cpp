#include "inference/classifier.hpp"

#include <atomic>
#include <cmath>
#include <deque>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "inference/cpu/cpu_engine.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "inference/model/model_card.hpp"
#include "inference/model/resnet.hpp"
#include "inference/model/safetensors.hpp"

namespace vc::inference {
namespace {

// The CPU reference engine behind the Classifier interface: submit() computes at once, collect() hands it over.
class CpuClassifier final : public Classifier {
 public:
  CpuClassifier(LoadedModel model, int threads, int batch)
      : engine_(std::move(model.network), threads), threads_(threads), batch_(batch) {
    engine_.set_interrupt(&interrupted_);
    settings_ = std::move(model.settings);
    architecture_ = engine_.network().architecture;
    params_ = inference::preprocess_params(settings_.model);
    num_classes_ = engine_.network().num_classes;
  }
  std::string engine_name() const override {
    return fmt::format("CPU reference ({} threads)", threads_ > 0 ? threads_ : int(std::thread::hardware_concurrency()));
  }
  int max_batch() const override { return batch_; }
  int max_in_flight() const override { return 1; }

  void submit(std::span<const FrameView> frames) override {
    if (interrupted_) throw Interrupted("the CPU engine was stopped (the run is stopping)");
    if (!pending_.empty()) throw InternalError("CPU classifier: collect() the previous batch first");
    if (frames.empty() || int(frames.size()) > batch_) {
      throw DataError(fmt::format("{} frames for a batch of at most {}", frames.size(), batch_));
    }
    const int n = int(frames.size()), s = params_.size, c = params_.channels;
    input_.resize(size_t(n) * s * s * c);
    for (int i = 0; i < n; ++i) {
      if (frames[size_t(i)].memory != MemoryKind::Host) throw InternalError("CPU classifier: a frame in GPU memory");
      preprocess_cpu(frames[size_t(i)], params_, input_.data() + size_t(i) * s * s * c);
    }
    pending_.push_back(engine_.forward(input_, n, s, s));
  }

  bool ready() override { return !pending_.empty(); }  // the work is done in submit()
  void interrupt() override { interrupted_ = true; }

  void collect(std::vector<float>& logits) override {
    if (pending_.empty()) throw InternalError("CPU classifier: nothing submitted");
    logits = std::move(pending_.front());
    pending_.pop_front();
  }

 private:
  CpuEngine engine_;
  int threads_;
  int batch_;
  std::vector<uint16_t> input_;
  std::deque<std::vector<float>> pending_;
  std::atomic<bool> interrupted_{false};
};

// Every floating-point tensor of the file must be finite: a NaN or Inf weight would make every score NaN.
void check_finite(const SafetensorsFile& file) {
  for (const auto& t : file.tensors()) {
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F64) continue;
    const auto values = file.to_float(t);
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        throw DataError(fmt::format("{}: tensor '{}' holds {} at element {}: the weights are corrupt", file.origin(),
                                    t.name, std::isnan(values[i]) ? "NaN" : "Inf", i));
      }
    }
  }
}

// Merges the configuration's model section with the model file's card, logging where each setting came from.
ModelSettings merge_settings(const config::Config& cfg, const ModelCard& card, const std::string& weights, int num_classes) {
  ModelSettings s;
  s.model = cfg.model;
  s.model.weights = weights;
  auto pick = [&](const char* key, auto& field, const auto& from_card, auto show) {
    const std::string path = std::string("model.") + key;
    const char* origin = "default";
    if (cfg.is_set(path)) {
      origin = "the configuration";
    } else if (from_card) {
      field = *from_card;
      origin = "the model file";
      s.from_card[path] = "model file";
    }
    s.provenance.push_back(fmt::format("{} = {} ({})", path, show(field), origin));
  };
  auto plain = [](const auto& v) { return fmt::format("{}", v); };
  pick("input_size", s.model.input_size, card.input_size, plain);
  std::optional<config::Resize> card_resize;
  if (card.resize) {
    card_resize = *card.resize == "crop" ? config::Resize::Crop
                  : *card.resize == "letterbox" ? config::Resize::Letterbox : config::Resize::Stretch;
  }
  pick("resize", s.model.resize, card_resize, [](config::Resize r) { return std::string(config::name(r)); });
  pick("crop_ratio", s.model.crop_ratio, card.crop_ratio, plain);
  pick("mean", s.model.mean, card.mean, [](const auto& v) { return fmt::format("[{}]", fmt::join(v, ", ")); });
  pick("std", s.model.std, card.std, [](const auto& v) { return fmt::format("[{}]", fmt::join(v, ", ")); });

  if (!cfg.model.labels.empty()) {
    s.labels = load_labels(cfg.model.labels);
    s.provenance.push_back(fmt::format("model.labels = {} ({} names, from the configuration)", cfg.model.labels, s.labels.size()));
  } else if (!card.labels.empty()) {
    s.labels = card.labels;
    s.from_card["model.labels"] = fmt::format("model file: {} names", s.labels.size());
    s.provenance.push_back(fmt::format("model.labels = {} names (from the model file)", s.labels.size()));
  } else {
    s.provenance.push_back("model.labels = none: classes are reported as \"class N\" (default)");
  }
  if (num_classes > 0 && !s.labels.empty() && int(s.labels.size()) != num_classes) {
    throw DataError(fmt::format("{} has {} labels but {} has {} classes",
                                cfg.model.labels.empty() ? weights + "'s metadata" : cfg.model.labels, s.labels.size(),
                                weights, num_classes));
  }
  return s;
}

}  // namespace

std::vector<std::vector<float>> Classifier::classify(std::span<const FrameView> frames) {
  if (frames.empty()) return {};
  submit(frames);
  std::vector<float> flat;
  collect(flat);
  std::vector<std::vector<float>> out(frames.size());
  const size_t k = size_t(num_classes_);
  for (size_t i = 0; i < frames.size(); ++i) out[i].assign(flat.begin() + long(i * k), flat.begin() + long((i + 1) * k));
  return out;
}

PreprocessParams preprocess_params(const config::Model& m) {
  PreprocessParams p;
  p.size = m.input_size;
  p.mode = m.resize == config::Resize::Crop ? ResizeMode::Crop
           : m.resize == config::Resize::Letterbox ? ResizeMode::Letterbox : ResizeMode::Stretch;
  p.crop_ratio = float(m.crop_ratio);
  for (int i = 0; i < 3; ++i) {
    p.mean[i] = float(m.mean[size_t(i)]);
    p.std[i] = float(m.std[size_t(i)]);
  }
  return p;
}

std::string weights_file(const config::Config& cfg) {
  return cfg.model.weights.empty() ? config::bundled_asset("models/resnet18-fashion-mnist.safetensors") : cfg.model.weights;
}

LoadedModel load_model(const config::Config& cfg) {
  auto log = vc::log::get("model");
  const auto weights = weights_file(cfg);
  const auto file = SafetensorsFile::open(weights);
  check_finite(file);
  const auto card = read_model_card(file.metadata(), weights);
  std::string architecture = cfg.model.architecture;
  if (architecture == "auto" && card.architecture) architecture = *card.architecture;
  LoadedModel model{build_resnet(file, architecture, cfg.model.bn_eps), {}};
  model.settings = merge_settings(cfg, card, weights, model.network.num_classes);
  if (const auto it = file.metadata().find("weights"); it != file.metadata().end() && it->second == "random") {
    model.settings.random_weights = true;
    log->warn("{}: its weights are random (exported with --random): its labels mean nothing; export pretrained or "
              "trained weights for real use", weights);
  }
  const int size = model.settings.model.input_size;
  log->info("{}: {} ({} classes, {:.2f} GMAC per {}x{} frame)", weights, model.network.architecture,
            model.network.num_classes, model.network.macs(size, size) / 1e9, size, size);
  for (const auto& line : model.settings.provenance) log->info("  {}", line);
  return model;
}

ModelSettings model_settings(const config::Config& cfg) {
  const auto weights = weights_file(cfg);
  const auto file = SafetensorsFile::open(weights);
  auto settings = merge_settings(cfg, read_model_card(file.metadata(), weights), weights, -1);
  if (auto arch = read_model_card(file.metadata(), weights).architecture; arch && cfg.model.architecture == "auto") {
    settings.model.architecture = *arch;
    settings.from_card["model.architecture"] = "model file";
  }
  return settings;
}

std::unique_ptr<Classifier> make_cuda_classifier(LoadedModel model, const config::Config& config);  // cuda_classifier.cpp

std::unique_ptr<Classifier> Classifier::create(const config::Config& config) {
  auto log = vc::log::get("inference");
  bool cuda = config.inference.device != config::Device::Cpu;
  // The model is read while the GPU is probed (the CUDA driver's start and cuDNN's libraries: most of a fresh
  // machine's first second).
  auto model_read = std::async(cuda ? std::launch::async : std::launch::deferred, load_model, std::cref(config));
  if (cuda) {
    const auto gpus = probe_gpus();
    const bool usable = int(gpus.devices.size()) > config.inference.gpu_id && gpus.cudnn_problems.empty();
    if (!usable) {
      const std::string why = gpus.devices.empty() ? gpus.cuda_error
                              : !gpus.cudnn_problems.empty()
                                  ? gpus.cudnn_problems.front()
                                  : fmt::format("inference.gpu_id {} but {} GPU(s)", config.inference.gpu_id, gpus.devices.size());
      if (config.inference.device == config::Device::Cuda) {
        throw UnavailableError("inference.device is cuda but no GPU is usable: " + why);
      }
      log->warn("no usable GPU ({}): using the CPU reference engine, which is much slower", why);
      cuda = false;
    }
  }
  auto model = model_read.get();
  std::unique_ptr<Classifier> classifier;
  if (cuda) {
    classifier = make_cuda_classifier(std::move(model), config);
  } else {
    classifier = std::make_unique<CpuClassifier>(std::move(model), config.inference.cpu_threads, config.inference.batch_size);
  }
  log->info("engine: {}", classifier->engine_name());
  return classifier;
}

std::vector<std::unique_ptr<Classifier>> Classifier::create_all(const config::Config& config) {
  const auto& n = config.inference;
  std::vector<std::unique_ptr<Classifier>> engines;
  if ((n.gpus.empty() && !n.all_gpus) || n.device == config::Device::Cpu) {
    if (n.device == config::Device::Cpu && (!n.gpus.empty() || n.all_gpus)) {
      vc::log::get("inference")->warn("inference.gpus is for the cuDNN engine, and inference.device is cpu: one CPU engine");
    }
    engines.push_back(create(config));
    return engines;
  }
  const auto gpus = probe_gpus();
  std::vector<int> ids = n.gpus;
  if (n.all_gpus) {
    for (size_t i = 0; i < gpus.devices.size(); ++i) ids.push_back(int(i));
  }
  if (ids.empty() || !gpus.cudnn_problems.empty()) {  // no GPU usable: create() says why, or falls back to the CPU
    config::Config one = config;
    one.inference.gpus.clear();
    one.inference.all_gpus = false;
    engines.push_back(create(one));
    return engines;
  }
  for (int id : ids) {
    if (id >= int(gpus.devices.size())) {
      throw UnavailableError(fmt::format("inference.gpus names GPU {}, but this machine has {} GPU(s){}", id,
                                         gpus.devices.size(), gpus.devices.empty() ? "" : fmt::format(" (0 to {})", gpus.devices.size() - 1)));
    }
  }
  const auto on = [&](int id) {
    config::Config c = config;
    c.inference.gpu_id = id;
    return create(c);
  };
  engines.push_back(on(ids.front()));  // tunes, and caches what it tuned for the others
  std::vector<std::future<std::unique_ptr<Classifier>>> rest;
  for (size_t i = 1; i < ids.size(); ++i) rest.push_back(std::async(std::launch::async, on, ids[i]));
  std::exception_ptr first_error;
  for (auto& f : rest) {
    try {
      engines.push_back(f.get());
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  return engines;
}

}  // namespace vc::inference
