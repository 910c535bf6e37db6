// The GPU Classifier: frames -> GpuPreprocessor (its own stream) -> CudnnEngine (CUDA graph) -> logits, with two
// batches in flight. Each of the two slots owns a preprocessed input and pinned logits; events order the work:
//
//   prep stream:    [wait slot's input free] preprocess N+1 -> input[s] [record prepared]
//   engine stream:  [wait prepared] copy input[s] -> engine input [record input free] graph [logits -> pinned]
//                   [record done]
//
// so preprocessing (and the upload of host frames) of batch N+1 runs while the engine computes batch N. A
// partial batch runs the full engine batch (the graph has one shape); only the frames given are returned.
#include <array>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/cuda/engine/cudnn_engine.hpp"
#include "inference/cuda/preprocess_gpu.hpp"

namespace vc::inference {
namespace {

constexpr int kSlots = 2;

class CudaClassifier final : public Classifier {
 public:
  // `cancel`: set, the engine's tuning gives up (CudnnEngineOptions::cancel).
  CudaClassifier(LoadedModel model, const config::Config& config, const std::atomic<bool>* cancel = nullptr)
      : network_(std::move(model.network)),
        config_(config),
        engine_(network_, model.settings.model.input_size, model.settings.model.input_size, options(config, cancel)),
        prep_stream_(make_stream(StreamPriority::kLive)),
        preprocessor_(with_channels(inference::preprocess_params(model.settings.model), engine_.input_channels()), engine_.batch(),
                      prep_stream_, kSlots, size_t(1920) * 1080 * 3 / 2) {
    device_ = config.inference.gpu_id;
    settings_ = std::move(model.settings);
    architecture_ = network_.architecture;
    params_ = preprocessor_.params();
    num_classes_ = engine_.num_classes();
    image_elements_ = size_t(engine_.height()) * engine_.width() * engine_.input_channels();
    for (auto& s : slots_) {
      s.input = DeviceBuffer<__half>(size_t(engine_.batch()) * image_elements_);
      s.logits = PinnedBuffer<float>(size_t(engine_.batch()) * engine_.num_classes());
      s.prepared = make_event();
      s.input_free = make_event();
      s.done = make_event();
    }
  }

  // Its CUDA objects are released on its own GPU, whichever thread lets it go.
  ~CudaClassifier() override { cudaSetDevice(device_); }

  std::string engine_name() const override { return "cuDNN on " + engine_.report().gpu; }
  int max_batch() const override { return engine_.batch(); }
  int max_in_flight() const override { return kSlots; }
  int cuda_device() const override { return device_; }

  Tuner tuner() const override {
    if (engine_.report().untuned_layers == 0) return nullptr;
    auto model = std::make_shared<LoadedModel>(LoadedModel{network_, settings_});
    auto tuned = config_;
    tuned.inference.tune_in_background = false;
    return [model, tuned](const std::atomic<bool>& cancel) -> std::unique_ptr<Classifier> {
      return std::make_unique<CudaClassifier>(std::move(*model), tuned, &cancel);
    };
  }

  void submit(std::span<const FrameView> frames) override {
    if (frames.empty() || int(frames.size()) > engine_.batch()) {
      throw DataError(fmt::format("{} frames for an engine batch of {}", frames.size(), engine_.batch()));
    }
    if (in_flight_ == kSlots) throw InternalError("CUDA classifier: collect() a batch before submitting another");
    CUDA_CHECK(cudaSetDevice(device_));  // the runtime's current device is per thread
    Slot& s = slots_[size_t(next_submit_)];
    if (s.used) CUDA_CHECK(cudaStreamWaitEvent(prep_stream_, s.input_free, 0));
    preprocessor_.run(frames, s.input.get(), next_submit_);
    CUDA_CHECK(cudaEventRecord(s.prepared, prep_stream_));

    const cudaStream_t es = engine_.stream();
    CUDA_CHECK(cudaStreamWaitEvent(es, s.prepared, 0));
    CUDA_CHECK(cudaMemcpyAsync(engine_.input(), s.input.get(), frames.size() * image_elements_ * sizeof(__half),
                               cudaMemcpyDeviceToDevice, es));
    CUDA_CHECK(cudaEventRecord(s.input_free, es));
    engine_.enqueue();
    CUDA_CHECK(cudaMemcpyAsync(s.logits.get(), engine_.logits(), frames.size() * size_t(num_classes_) * sizeof(float),
                               cudaMemcpyDeviceToHost, es));
    CUDA_CHECK(cudaEventRecord(s.done, es));
    s.frames = int(frames.size());
    s.used = true;
    next_submit_ = (next_submit_ + 1) % kSlots;
    ++in_flight_;
  }

  bool ready() override {
    if (in_flight_ == 0) return false;
    const cudaError_t status = cudaEventQuery(slots_[size_t(next_collect_)].done);
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);  // a fault in the batch: the same error collect() would raise
    return true;
  }

  void collect(std::vector<float>& logits) override {
    if (in_flight_ == 0) throw InternalError("CUDA classifier: nothing submitted");
    Slot& s = slots_[size_t(next_collect_)];
    CUDA_CHECK(cudaEventSynchronize(s.done));
    logits.assign(s.logits.get(), s.logits.get() + size_t(s.frames) * size_t(num_classes_));
    next_collect_ = (next_collect_ + 1) % kSlots;
    --in_flight_;
  }

 private:
  struct Slot {
    DeviceBuffer<__half> input;  // preprocessed batch, waiting for the engine
    PinnedBuffer<float> logits;
    CudaEvent prepared, input_free, done;
    int frames = 0;
    bool used = false;
  };

  static CudnnEngineOptions options(const config::Config& c, const std::atomic<bool>* cancel) {
    CudnnEngineOptions o;
    o.cancel = cancel;
    o.batch = c.inference.batch_size;
    o.device = c.inference.gpu_id;
    o.tf32_stem = c.inference.precision == config::Precision::Tf32Stem;
    o.autotune = c.inference.autotune;
    o.quick = c.inference.autotune && c.inference.tune_in_background;
    o.cache_path = config::expand_home(c.inference.autotune_cache);
    o.workspace_limit = size_t(c.inference.workspace_mb) << 20;
    o.deterministic = c.inference.deterministic;
    o.cuda_graph = c.inference.cuda_graph;
    o.algorithms = c.inference.algorithms;
    return o;
  }
  static PreprocessParams with_channels(PreprocessParams p, int channels) {
    p.channels = channels;
    return p;
  }

  Network network_;
  config::Config config_;  // (what its tuned self is built with)
  CudnnEngine engine_;
  CudaStream prep_stream_;
  GpuPreprocessor preprocessor_;
  std::array<Slot, kSlots> slots_;
  size_t image_elements_ = 0;
  int device_ = 0;
  int next_submit_ = 0, next_collect_ = 0, in_flight_ = 0;

};

}  // namespace

std::unique_ptr<Classifier> make_cuda_classifier(LoadedModel model, const config::Config& config) {
  return std::make_unique<CudaClassifier>(std::move(model), config);
}

}  // namespace vc::inference
