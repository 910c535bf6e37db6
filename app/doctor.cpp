#include "app/doctor.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <opencv2/core/version.hpp>

#include "config/errors.hpp"
#include "config/version.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "pipeline/outputs/video_output.hpp"
#include "pipeline/results/mqtt_sink.hpp"
#include "pipeline/sources/decoders.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "service/server.hpp"

namespace vc::app {
namespace {

void line(std::ostream& out, const char* status, const std::string& what, const std::string& detail) {
  fmt::print(out, "  [{:^7}] {:<34} {}\n", status, what, detail);
}

}  // namespace

int run_doctor(const config::Config& config, std::ostream& out) {
  bool broken = false;
  fmt::print(out, "video-classifier {} (git {}) doctor\n\nGPU and CUDA\n", kVersion, kGitRevision);
  const auto gpu = inference::probe_gpus();
  line(out, gpu.driver_version.empty() ? "missing" : "ok", "NVIDIA driver",
       gpu.driver_version.empty() ? "not loaded (no /proc/driver/nvidia/version)" : gpu.driver_version);
  line(out, gpu.cuda_driver_api ? "ok" : "missing", "CUDA driver API",
       gpu.cuda_driver_api ? inference::cuda_version_string(gpu.cuda_driver_api) : "none");
  line(out, "ok", "CUDA runtime (static)", inference::cuda_version_string(gpu.cuda_runtime));
  if (gpu.cuda_driver_api && gpu.cuda_driver_api < gpu.cuda_runtime) {
    line(out, "FAIL", "driver vs runtime",
         fmt::format("the driver supports CUDA {} but the app needs {}: update the NVIDIA driver",
                     inference::cuda_version_string(gpu.cuda_driver_api), inference::cuda_version_string(gpu.cuda_runtime)));
    broken = true;
  }
  for (const auto& d : gpu.devices) {
    line(out, d.fp16_tensor_cores ? "ok" : "warn", fmt::format("GPU {}", d.ordinal),
         fmt::format("{}, compute {}.{}, {} SMs, {:.1f} GiB ({:.1f} GiB free), FP16 Tensor Cores: {}", d.name,
                     d.cc_major, d.cc_minor, d.multiprocessors, d.total_bytes / 1073741824.0,
                     d.free_bytes / 1073741824.0, d.fp16_tensor_cores ? "yes" : "no (slow FP16)"));
  }
  if (gpu.devices.empty()) line(out, "no GPU", "GPUs", gpu.cuda_error + " — the CPU engine will be used");

  fmt::print(out, "\ncuDNN\n");
  line(out, "ok", "compiled against", inference::cudnn_version_string(gpu.cudnn_compiled));
  line(out, gpu.cudnn_problems.empty() ? "ok" : "FAIL", "loaded",
       fmt::format("{} from {}", inference::cudnn_version_string(gpu.cudnn_loaded), gpu.cudnn_library));
  for (const auto& p : gpu.cudnn_problems) line(out, "FAIL", "", p);
  if (!gpu.cudnn_problems.empty()) {
    line(out, "", "", "fix: install cuDNN 9 for CUDA 13 and put its lib directory on LD_LIBRARY_PATH");
    broken = true;
  }

  fmt::print(out, "\n{}\n", pipeline::gstreamer_version());
  const auto elements = pipeline::probe_elements();
  for (const auto& e : elements) {
    const char* status = e.present ? "ok" : (e.required ? "FAIL" : "absent");
    line(out, status, e.name, e.purpose);
    broken |= e.required && !e.present;
  }
  const bool any_encoder = std::any_of(elements.begin(), elements.end(), [](const auto& e) {
    return e.present && (e.name == "x264enc" || e.name == "openh264enc" || e.name == "nvh264enc");
  });
  if (!any_encoder) {
    line(out, "FAIL", "H.264 encoder", "none of x264enc, openh264enc, nvh264enc (gstreamer1.0-plugins-ugly)");
    broken = true;
  }

  fmt::print(out, "\nDecoders, per codec and profile: the one used first (NVDEC appears only where the NVIDIA driver "
                  "and a GPU are usable)\n");
  for (const auto& p : pipeline::probe_decoders()) {
    const auto& usable = p.choice.usable;
    std::string detail = usable.empty() ? "no decoder decodes it correctly: refused" : usable.front().factory;
    if (!usable.empty() && usable.front().gpu) {
      std::string gpus;  // one NVDEC element per GPU (nvh264dec, nvh264device1dec, …)
      for (const auto& d : usable) {
        if (d.gpu) gpus += fmt::format("{}{}", gpus.empty() ? "" : ", ", pipeline::nvdec_device(d.factory));
      }
      detail += fmt::format(" (NVDEC, on GPU {})", gpus);
    }
    for (size_t i = 1; i < usable.size(); ++i) detail += fmt::format("{}{}", i == 1 ? ", then " : ", ", usable[i].factory);
    for (const auto& r : p.choice.rejected) {
      if (r.factory.find("alphadecodebin") == std::string::npos) detail += fmt::format("; never {} ({})", r.factory, r.unfit);
    }
    const bool any_gpu = !usable.empty() && usable.front().gpu;
    line(out, usable.empty() ? "absent" : any_gpu ? "ok" : "cpu", p.profile.empty() ? p.codec : p.codec + " " + p.profile,
         detail);
  }
  const auto sync = pipeline::gpu_frame_sync();
  if (gpu.devices.empty()) {  // (what this GStreamer could do on a GPU is not this machine's to show)
    line(out, "no GPU", "NVDEC frames on the GPU", "none here: frames are decoded and read in host memory");
  } else {
    line(out, !sync.usable ? "warn" : sync.verified ? "ok" : "warn", "NVDEC frames on the GPU",
         sync.how + (sync.verified ? " (verified on a GPU: the same top-1 as CPU decoding)"
                                   : " (not verified on a GPU with this GStreamer: run scripts/device-run.sh's nvdec stage)"));
  }

  fmt::print(out, "\nDisplay\n");
  try {
    const auto sink = pipeline::display_sink(true);
    line(out, "ok", "display", sink + " opens the display");
  } catch (const Error& e) {
    line(out, "absent", "display", std::string(e.what()) + " (--output display will not work; files and RTSP do)");
  }

  bool service_down = false;  // a configured broker or port: not the install's fault, but the run would suffer
  if (config.mqtt.enabled || config.metrics.enabled) {
    fmt::print(out, "\nService (from the configuration)\n");
    if (config.mqtt.enabled) {
      std::string why;
      const bool up = pipeline::MqttSink::probe(config.mqtt, std::chrono::seconds(3), why);
      line(out, up ? "ok" : "FAIL", "MQTT broker",
           fmt::format("{}:{} {}", config.mqtt.host, config.mqtt.port, up ? "accepts a connection" : "does not answer: " + why));
      service_down |= !up;
    }
    if (config.metrics.enabled) {
      std::string why;
      const bool free = service::Server::port_free(config.metrics.address, config.metrics.port, why);
      line(out, free ? "ok" : "FAIL", "metrics port",
           fmt::format("{}:{} {}", config.metrics.address, config.metrics.port, free ? "is free" : "cannot be used: " + why));
      service_down |= !free;
    }
  }

  fmt::print(out, "\nOpenCV\n");
  line(out, "ok", "core + imgproc", CV_VERSION);

  if (broken) {
    fmt::print(out, "\nResult: BROKEN INSTALL — fix the FAIL lines above (exit {}).\n", int(ExitCode::kOsFile));
    return static_cast<int>(ExitCode::kOsFile);
  }
  if (service_down) {
    fmt::print(out, "\nResult: install OK, but a configured service is not reachable — see the Service lines (exit {}).\n",
               int(ExitCode::kUnavailable));
    return static_cast<int>(ExitCode::kUnavailable);
  }
  if (gpu.devices.empty()) {
    fmt::print(out, "\nResult: install OK, NO GPU — runs on the CPU reference engine (exit {}).\n",
               int(ExitCode::kUnavailable));
    return static_cast<int>(ExitCode::kUnavailable);
  }
  fmt::print(out, "\nResult: OK — {} GPU(s) ready.\n", gpu.devices.size());
  return 0;
}

}  // namespace vc::app
