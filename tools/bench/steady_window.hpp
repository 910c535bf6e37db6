// The steady state of a live run (issue #42's density part): from a moment after every stream's first frame to the
// run's stop, what the streams did — frames, drops by the stage that dropped them, capture-to-result latency and each
// stage's time (mean, p99) over that window only, and each stream's frames in flight (delivered, not yet classified
// or dropped) sampled every second. The start-up (decoders opening one after another, the first batches) is left
// out: a count of streams is held when this window drops nothing.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/thread_cpu.hpp"
#include "pipeline/core/control.hpp"

namespace vc::bench {

class SteadyWindow {
 public:
  // Watches the run's first `streams` streams (added ones, "churn…", are not counted); the window opens `settle_s`
  // after the last of them had its first frame.
  SteadyWindow(pipeline::RunControl& run, int streams, double settle_s);
  ~SteadyWindow();
  SteadyWindow(const SteadyWindow&) = delete;
  SteadyWindow& operator=(const SteadyWindow&) = delete;

  // Closes the window: call before the run stops its streams. Idempotent.
  void close();
  // {"opened": false} when every stream never ran; else {"opened_s" (from construction), "seconds", "frames",
  // "fps", "dropped", "dropped_in_queue", "dropped_at_output", "dropped_by_stream", "latency_ms": {p50, p99},
  // "stages_ms": {queue|inference|post|output: {mean, p99}}, "in_flight": {mean, max, max_stream}, "drops_by_second",
  // "start_drops": [{second, queue, output, streams_started, batches, engine_busy_ms, batches_over_33ms}] (before the
  // window opened, seconds with drops only; the engine's batches that second, their time, and how many took longer
  // than a 30 fps frame's interval),
  // "threads": the busiest thread names' CPU cores over the window (thread_cpu.hpp)}.
  [[nodiscard]] nlohmann::json report() const;

  struct Counts;  // (steady_window.cpp)

 private:
  void watch();
  // Before the window: the drops and the engine's batches since the last call, added to the second `at_s` falls in.
  void note_start_drops(const std::vector<std::shared_ptr<const pipeline::StreamStats>>& streams, double at_s);
  [[nodiscard]] std::vector<std::shared_ptr<const pipeline::StreamStats>> watched() const;

  pipeline::RunControl& run_;
  const int streams_;
  const double settle_s_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool closed_ = false;
  double opened_s_ = -1, seconds_ = 0;
  std::unique_ptr<Counts> first_, last_;
  ThreadTimes threads_first_, threads_last_;  // (at the window's open and close)
  std::chrono::steady_clock::time_point threads_first_at_, threads_last_at_;
  std::vector<int64_t> drops_by_second_;
  // Before the window, by second from the start: the streams' drops (queue, output) and the first engine's batches
  // (count, their time, those over a 30 fps frame's 33 ms) in that second; `started`: streams that had had their
  // first frame at its last drop.
  struct StartSecond {
    int64_t queue = 0, output = 0, batches = 0, over_33ms = 0;
    double busy_ms = 0;
    int started = 0;
  };
  std::vector<StartSecond> start_seconds_;
  StartSecond start_seen_;  // the counts since the start at the last look
  double in_flight_sum_ = 0;
  int64_t in_flight_samples_ = 0, in_flight_max_ = 0;
  std::string in_flight_max_stream_;
  std::thread thread_;
};

// One line of the table for a run's steady window (report()'s JSON; nothing for a null or unopened one).
void print_steady(const nlohmann::json& steady);

}  // namespace vc::bench
