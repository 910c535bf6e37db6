// The GPU Classifier: frames -> GpuPreprocessor (pinned staging, one kernel) -> CudnnEngine (CUDA graph) -> logits.
// Partial batches run the full engine batch (the graph has one shape); only the frames given are returned.
#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/cuda/cudnn_engine.hpp"
#include "inference/cuda/preprocess_gpu.hpp"

namespace vc::inference {
namespace {

class CudaClassifier final : public Classifier {
 public:
  CudaClassifier(LoadedModel model, const config::Config& config)
      : network_(std::move(model.network)),
        engine_(network_, config.model.input_size, config.model.input_size, options(config)),
        preprocessor_(with_channels(inference::preprocess_params(config.model), engine_.input_channels()),
                      engine_.batch(), engine_.stream(), size_t(1920) * 1080 * 4),
        logits_(size_t(engine_.batch()) * engine_.num_classes()) {
    labels_ = std::move(model.labels);
    architecture_ = network_.architecture;
    params_ = preprocessor_.params();
  }

  std::string engine_name() const override { return "cuDNN on " + engine_.report().gpu; }
  int max_batch() const override { return engine_.batch(); }

  std::vector<std::vector<float>> classify(std::span<const FrameView> frames) override {
    if (frames.empty()) return {};
    if (int(frames.size()) > engine_.batch()) {
      throw DataError(fmt::format("{} frames for an engine batch of {}", frames.size(), engine_.batch()));
    }
    preprocessor_.run(frames, engine_.input());
    engine_.enqueue();
    CUDA_CHECK(cudaMemcpyAsync(logits_.get(), engine_.logits(), logits_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                               engine_.stream()));
    CUDA_CHECK(cudaStreamSynchronize(engine_.stream()));
    const size_t k = size_t(engine_.num_classes());
    std::vector<std::vector<float>> out(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) out[i].assign(logits_.get() + i * k, logits_.get() + (i + 1) * k);
    return out;
  }

 private:
  static CudnnEngineOptions options(const config::Config& c) {
    CudnnEngineOptions o;
    o.batch = c.inference.batch_size;
    o.device = c.inference.gpu_id;
    o.tf32_stem = c.inference.precision == "tf32_stem";
    o.autotune = c.inference.autotune;
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
  CudnnEngine engine_;
  GpuPreprocessor preprocessor_;
  PinnedBuffer<float> logits_;
};

}  // namespace

std::unique_ptr<Classifier> make_cuda_classifier(LoadedModel model, const config::Config& config) {
  return std::make_unique<CudaClassifier>(std::move(model), config);
}

}  // namespace vc::inference
