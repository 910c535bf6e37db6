// The application's run: every input stream -> the batcher -> the engine (two batches in flight) -> per-stream
// post-processing, result sinks and video outputs, with a progress line for files, a periodic performance report
// for live streams, and a summary per stream at the end. The layers above (service/) see and steer it through
// its control interface (core/control.hpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "pipeline/core/control.hpp"

namespace vc::pipeline {

struct StreamSummary {
  std::string name, source, decoder, status;  // status: "ok", "interrupted", "failed"
  std::string error;                          // why it failed
  int64_t frames = 0, dropped = 0, output_dropped = 0, reconnects = 0, non_finite = 0, failed_images = 0;
  int64_t damaged_frames = 0, lost_frames = 0;  // decoded from damaged data; could not be decoded at all
  bool live = false, gpu_frames = false;
  double fps = 0;
  double latency_mean_ms = 0, latency_p50_ms = 0, latency_p99_ms = 0;
  double queue_ms = 0, inference_ms = 0, post_ms = 0, output_ms = 0;  // mean per stage
  // Seconds from the run's start to the stream's first frame and to its last result (-1: none): when it ran.
  double first_frame_s = -1, last_result_s = -1;
};

struct RunSummary {
  std::vector<StreamSummary> streams;
  int64_t frames = 0, dropped = 0;
  double seconds = 0;
  double latency_p50_ms = 0, latency_p99_ms = 0;
  bool interrupted = false;
  std::string engine;
  ExitCode code = ExitCode::kOk;              // kOk, or what went wrong first (a lost result, a failed stream)
  std::vector<std::string> problems;          // every failure but the streams' own (those are in their rows)
  std::vector<std::string> failed_streams;    // the streams that failed (their rows say why)
  std::vector<std::pair<std::string, int64_t>> sink_drops;  // best-effort sinks (MQTT): messages dropped
  std::string events;                         // with event rules: "3 events, 3 clips, 3 snapshots in DIR"; else ''
  int64_t event_count = 0, event_clips = 0, event_clip_bytes = 0, event_failures = 0;
  // Streams whose source did not stop (a decoder stuck in the driver): their threads still run, so the process must
  // end without tearing down what they use (app: _exit after the outputs are finalized).
  std::vector<std::string> abandoned;
};

class Runner {
 public:
  // Sets the run up: the engine, every stream (not started yet), the batcher, the outputs and the result sinks.
  // Throws vc::Error subclasses (a missing model, an output that would overwrite an input, …). `classifier`: the
  // engine to run with instead of the configured one (tests).
  explicit Runner(const config::Config& config, std::unique_ptr<inference::Classifier> classifier = nullptr);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // What the service reads (and, later, steers); valid as long as the runner lives.
  [[nodiscard]] RunControl& control();

  // Starts every stream and runs until each has ended, `stop` becomes non-zero (Ctrl-C), or something that loses
  // data happens. Outputs are always finalized. Problems during the run end up in the summary's code and
  // problems. Call once.
  RunSummary run(const std::atomic<int>& stop);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The end-of-run table: one line per stream, then the totals.
std::string format_summary(const RunSummary& summary);

}  // namespace vc::pipeline
