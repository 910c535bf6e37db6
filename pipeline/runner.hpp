// The application's main loop: capture -> preprocess + infer (batched when frames queue up) -> post-process ->
// overlay -> output, with the per-frame JSON record, a progress line for files and a summary at the end.
#pragma once
#include <atomic>
#include <cstdint>

#include "config/config.hpp"

namespace vc::pipeline {

struct RunSummary {
  int64_t frames = 0;
  int64_t dropped = 0;
  double seconds = 0;
  double mean_latency_ms = 0, p50_latency_ms = 0, p99_latency_ms = 0;
  bool interrupted = false;
};

// Runs until the input ends, `stop` becomes non-zero (Ctrl-C), or input.max_frames frames. Outputs are always
// finalized. Throws vc::Error subclasses for the app to map to exit codes.
RunSummary run(const config::Config& config, const std::atomic<int>& stop);

}  // namespace vc::pipeline
