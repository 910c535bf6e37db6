// Entry point of the GPU tests: without a usable GPU they report themselves skipped (exit 77, which ctest
// shows as "Skipped"), never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "inference/cuda/gpu_info.hpp"

int main(int argc, char** argv) {
  const auto report = vc::inference::probe_gpus();
  if (report.devices.empty()) {
    std::printf("SKIPPED: no usable GPU (%s)\n", report.cuda_error.c_str());
    return 77;
  }
  const auto& d = report.devices.front();
  std::printf("GPU tests on %s (compute %d.%d), cuDNN %s\n", d.name.c_str(), d.cc_major, d.cc_minor,
              vc::inference::cudnn_version_string(report.cudnn_loaded).c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
