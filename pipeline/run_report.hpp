// What a run reports while it goes and at its end: the progress line for files, the periodic performance line for
// live streams, and the summary — a row per stream, the totals, the exit status — with its table.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/core/stats.hpp"

namespace vc::pipeline {

class Collector;
class Stream;

struct StreamSummary {
  std::string name, source, decoder, status;  // status: "ok", "interrupted", "removed" (API), "failed"
  std::string error;                          // why it failed
  ExitCode code = ExitCode::kOk;              // and the exit code its failure gives
  int64_t frames = 0, dropped = 0, output_dropped = 0, reconnects = 0, non_finite = 0, failed_images = 0;
  int64_t damaged_frames = 0, lost_frames = 0;  // decoded from damaged data; could not be decoded at all
  bool live = false, gpu_frames = false;
  int engine = 0, gpu = -1;                   // the engine (inference.gpus) and GPU that classified it
  double fps = 0;
  double latency_mean_ms = 0, latency_p50_ms = 0, latency_p99_ms = 0;
  double queue_ms = 0, inference_ms = 0, post_ms = 0, output_ms = 0;  // mean per stage
  // Seconds from the run's start to the stream's first frame and to its last result (-1: none): when it ran.
  double first_frame_s = -1, last_result_s = -1;
  double opening_s = -1, started_s = -1;  // its source began to open, and was open (started), from the run's start
  double linked_s = -1, decoded_s = -1;   // its decoder linked (the demuxer found the video), its first picture
};

// One engine's share of the run (a line each when the run has several: inference.gpus).
struct EngineSummary {
  int engine = 0, gpu = -1;
  std::string name;           // "cuDNN on NVIDIA H200"
  int64_t streams = 0, frames = 0, batches = 0;
  std::string failure;        // why the engine failed ("" when it did not); its streams failed with it
};

struct RunSummary {
  std::vector<StreamSummary> streams;
  // Streams let go of before the last StreamTable::kRowsKept (a service's removed ones): counted, not listed (their
  // frames and drops are in the totals).
  int64_t earlier_streams = 0;
  std::vector<EngineSummary> engines;
  int64_t frames = 0, dropped = 0;
  int64_t unclassified = 0;                   // frames a stop cut short in the engine (they have no result)
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
  std::string collected;                      // with output.collect: "N frame(s) ... kept for review in DIR"
  // Streams whose source did not stop (a decoder stuck in the driver): their threads still run, so the process must
  // end without tearing down what they use (app: _exit after the outputs are finalized).
  std::vector<std::string> abandoned;
};

// The run's latency from its rows: p99 the worst stream's, p50 the median of the streams' p50.
void total_latency(RunSummary& summary);

// The end-of-run table: one line per stream, then the totals.
std::string format_summary(const RunSummary& summary);

// "\r  1200/3000 frames (40%)  412.3 fps  ETA 4 s" on a terminal, at most twice a second; elsewhere (a CI log, a pipe,
// systemd) the same as a log line every logging.progress_interval_s, so that a long file shows a sign of life.
// fps = frames / wall time.
class Progress {
 public:
  Progress(bool enabled, double log_interval_s);
  void update(const std::vector<std::unique_ptr<Stream>>& streams, Clock::time_point start);
  void done();

 private:
  bool terminal_, enabled_;
  Clock::duration interval_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// A one-line performance report every logging.perf_interval_s while live streams run (DeepStream's **PERF); streams
// that have ended (removed from a service) are left out.
class PerfReport {
 public:
  // `engines`: with more than one, each engine's total is shown too ("gpu1 812.0 fps").
  PerfReport(double interval_s, bool any_live, std::vector<int> engine_gpus = {0})
      : interval_(interval_s), enabled_(interval_s > 0 && any_live), engine_gpus_(std::move(engine_gpus)) {}
  // A live stream joined the run (the service's API).
  void live_joined() { enabled_ = interval_ > 0; }
  void update(const std::vector<std::unique_ptr<Stream>>& streams);

 private:
  double interval_;
  bool enabled_;
  std::vector<int> engine_gpus_;  // each engine's GPU
  Clock::time_point last_{};
  std::map<const StreamStats*, std::pair<int64_t, int64_t>> previous_;  // frames and drops at the last report
};

// A stream's row of the summary. `interrupted`: the run was stopped (a stream still going then is "interrupted").
StreamSummary summarize(const Stream& s, bool interrupted, Clock::time_point start);

// What the side stages lost — event files (events: null without rules), frames output.collect could not keep, the
// messages best-effort sinks dropped — into the summary's lines and problems and, while it is still 0, its exit code.
void report_losses(RunSummary& summary, const EventStats* events, const std::string& events_dir, const Collector* collector,
                   double collect_below, const std::vector<SinkStatus>& sinks);

// The summary's exit status and problems from what failed: lost results or video first (`failures`: they lose data
// the user asked for), then a failed engine (also in `failures`), then failed streams, then streams left behind after
// `stop_grace` with no stream finishing (what they delivered may be short: never a clean exit).
void settle_exit_status(RunSummary& summary, const std::vector<std::optional<Failure>>& failures,
                        std::chrono::seconds stop_grace);

// Warns a run that would write nothing anywhere (no output, no results, no service) of it, with what to add.
void warn_if_writing_nothing(const config::Config& cfg);

}  // namespace vc::pipeline
