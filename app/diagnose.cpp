// `video-classifier diagnose`: the NaN troubleshooting of the cuDNN documentation, as a command. It takes one frame
// (--image FILE, or the first frame of the configured input), runs the model layer by layer on the GPU beside the
// CPU reference, names the first layer whose output is non-finite or beyond its error bound with the algorithm it
// used, and re-runs that layer with the most stable choice to tell an algorithm fault from a data fault.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "app/commands.hpp"
#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/cuda/diagnose.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::app {
namespace {

// The first frame of an input, preprocessed for the model (CPU reference preprocessing).
std::vector<uint16_t> first_frame(const config::Input& input, const inference::PreprocessParams& params) {
  auto hub = std::make_shared<pipeline::FrameHub>(std::vector<pipeline::QueuePolicy>{{4, false}});
  auto stop = std::make_shared<std::atomic<bool>>(false);
  pipeline::Stream stream(0, input, false, {hub, nullptr, nullptr, stop, nullptr, nullptr});
  stream.start();
  std::vector<pipeline::Frame> frames;
  while (frames.empty() && !hub->all_done()) frames = hub->pop_batch(1, std::chrono::microseconds(0));
  *stop = true;
  while (!hub->all_done()) (void)hub->pop_batch(4, std::chrono::microseconds(0));
  stream.join();
  if (frames.empty()) {
    const auto f = stream.failure();
    throw DataError(f ? f->message : "diagnose: the input gave no frame");
  }
  std::vector<uint16_t> image(size_t(params.size) * params.size * params.channels);
  inference::preprocess_cpu(frames.front().view, params, image.data());
  return image;
}

}  // namespace

int diagnose(const CommandLine& cl, std::ostream& out) {
  const auto gpus = inference::probe_gpus();
  if (gpus.devices.empty()) throw UnavailableError("diagnose runs the model on the GPU, and no GPU is usable: " + gpus.cuda_error);
  auto model = inference::load_model(cl.config);
  config::Input input = cl.config.inputs.front();
  if (!cl.frame_path.empty()) {
    input = config::Input{};
    input.kind = config::InputKind::Image;
    input.path = cl.frame_path;
    input.name = "diagnose";
  }
  auto params = inference::preprocess_params(model.settings.model);
  params.channels = model.network.input_channels;
  const auto image = first_frame(input, params);
  inference::DiagnoseOptions options;
  options.device = cl.config.inference.gpu_id;
  options.cache_path = config::expand_home(cl.config.inference.autotune_cache);
  const auto d = inference::diagnose(model.network, params.size, params.size, image, options);
  fmt::print(out, "{}", inference::format_diagnosis(d));
  switch (d.fault) {
    case inference::Fault::None: return 0;
    case inference::Fault::Algorithm: return int(ExitCode::kInternal);
    default: return int(ExitCode::kData);
  }
}

}  // namespace vc::app
