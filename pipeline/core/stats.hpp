// What the run measures, per stream and in total: frame counts, drops, restarts, latency distributions and the
// per-stage breakdown. Written by the pipeline's threads, read by the progress line, the periodic performance
// report, /metrics and the end-of-run summary.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inference/postprocess.hpp"
#include "pipeline/core/frame.hpp"

namespace vc::pipeline {

// A latency distribution in fixed log-spaced buckets (0.01 ms .. ~170 s, 3 % wide): constant memory however long
// the run, percentiles within a bucket's width. Thread-safe.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 560;
  void add(double ms);
  [[nodiscard]] int64_t count() const;
  [[nodiscard]] double sum_ms() const;
  [[nodiscard]] double mean_ms() const;
  [[nodiscard]] double percentile_ms(double q) const;  // q in [0, 1]; 0 when empty
  // Count of values <= `ms` (for Prometheus' cumulative buckets).
  [[nodiscard]] int64_t count_at_most(double ms) const;

 private:
  static int bucket_of(double ms);
  static double upper_bound_of(int bucket);
  mutable std::mutex mutex_;
  // Allocated at the first value (4.5 KiB): a run of 10,000 streams that is refused at start-up never pays for them.
  std::unique_ptr<std::array<int64_t, kBuckets>> counts_;
  int64_t total_ = 0;
  double sum_ = 0;
};

// Frames per second over the last few seconds (for the overlay and the live report), thread-safe.
class RateMeter {
 public:
  void tick(Clock::time_point t);
  [[nodiscard]] double per_second(Clock::time_point now) const;

 private:
  static constexpr int kSlots = 8;  // 8 slots of 0.5 s: a 4 s window
  mutable std::mutex mutex_;
  std::array<int64_t, kSlots> counts_{};
  std::array<int64_t, kSlots> slot_ids_{};
  int64_t first_id_ = -1;
};

enum class StreamState { Starting, Running, Reconnecting, Ended, Failed };
const char* name(StreamState s);

struct StreamStats {
  std::string name;                       // the stream's name
  std::string source;                     // what it reads (path, URI, device)
  bool live = false;
  std::atomic<StreamState> state{StreamState::Starting};
  std::atomic<int64_t> delivered{0};      // frames the source produced
  std::atomic<int64_t> classified{0};     // frames with a result
  std::atomic<int64_t> queue_dropped{0};  // stale frames dropped before inference (live sources)
  std::atomic<int64_t> output_dropped{0}; // labelled frames the video output could not keep up with (live)
  std::atomic<int64_t> reconnects{0};     // source restarts after a failure or stall
  std::atomic<int64_t> loops{0};          // a looping file's passes after the first
  std::atomic<int64_t> non_finite{0};     // frames whose logits held NaN/Inf
  std::atomic<int64_t> failed_items{0};   // images that could not be decoded
  std::atomic<int64_t> damaged_frames{0}; // frames decoded from damaged data (flagged "damaged" in the results)
  std::atomic<int64_t> lost_frames{0};    // frames of the file the decoder could not decode at all
  std::atomic<int64_t> expected{-1};      // frames the file says it holds; -1 unknown
  std::atomic<int64_t> last_frame_ns{0};  // steady-clock time of the last delivered frame (0 = none yet)
  std::atomic<int64_t> first_frame_ns{0};
  std::atomic<int64_t> opening_ns{0};     // steady-clock time its source began to open (its pipeline built, started)
  std::atomic<int64_t> started_ns{0};     // steady-clock time the stream was started (a stream added later: then)
  std::atomic<int64_t> linked_ns{0};      // ...its demuxer found the video and the decoder was linked
  std::atomic<int64_t> decoded_ns{0};     // ...its decoder gave its first picture (first_frame_ns: it reached us)
  std::atomic<int64_t> last_result_ns{0};
  std::atomic<bool> gpu_frames{false};    // frames arrive in GPU memory (NVDEC)
  std::atomic<int> gpu{-1};               // the CUDA device that classifies it (-1: the CPU engine, or not placed yet)
  std::atomic<int> engine{0};             // the engine (inference.gpus: its index) that classifies it
  std::atomic<int64_t> events{0};         // rule events opened on this stream
  std::atomic<int> shown_width{0}, shown_height{0};  // its latest classified picture, as shown (what regions cut)
  std::atomic<bool> closed{false};        // ended, and its last result, its end event and its files are out
  mutable std::mutex text_mutex;          // guards decoder, error, end_reason and current
  std::string decoder;                    // decoder element in use
  std::string error;                      // why the stream failed, "" if it did not
  inference::Prediction current;          // the latest label (set_label)
  std::string end_reason;                 // why it ended: "end of input", "stopped", the error, …
  LatencyHistogram latency;               // capture -> result written
  LatencyHistogram queue_wait, inference, post, output;  // per-stage
  RateMeter rate;

  void set_decoder(const std::string& d);
  void set_error(const std::string& e);
  // The latest result's top-1 (what the overlay's headline shows), for the service's views.
  void set_label(const inference::Prediction& p);
  [[nodiscard]] inference::Prediction label() const;
  void set_end_reason(const std::string& r);
  [[nodiscard]] std::string end_reason_text() const;
  [[nodiscard]] std::string decoder_name() const;
  [[nodiscard]] std::string error_text() const;
  // Frames per second over the stream's whole life so far (frames / seconds from first frame to last result).
  [[nodiscard]] double average_fps() const;

  // Each region's results so far: how many, and its latest top-1 (for /metrics and the service's views).
  struct RegionStat {
    std::string region, model;
    int64_t classified = 0;
    inference::Prediction current;
  };
  void add_region_result(const std::string& region, const std::string& model, const inference::Prediction& top1);
  [[nodiscard]] std::vector<RegionStat> region_stats() const;
  void forget_region(const std::string& region);  // taken away over the API

 private:
  std::vector<RegionStat> regions_;  // (text_mutex)
};

// The event rules' side (pipeline/events/): events by what happened to them, clips and snapshots written, their
// bytes, what failed (a full disk) and what a full writer queue dropped.
struct EventStats {
  std::atomic<int64_t> opened{0}, updated{0}, ended{0};
  std::atomic<int64_t> clips{0}, clip_bytes{0}, snapshots{0}, failures{0}, dropped{0};
  std::atomic<int64_t> buffer_bytes{0};   // packets held for clips, every stream together
};

// The engine's side: batches, their sizes and how long each took (submit to logits back), and readiness.
struct EngineStats {
  static constexpr int kSizeBuckets = 11;  // batch sizes <= 1, 2, 4, … 1024
  LatencyHistogram batch_ms;
  std::array<std::atomic<int64_t>, kSizeBuckets> batch_sizes{};
  std::atomic<int64_t> batches{0}, frames{0};
  std::atomic<int64_t> unclassified{0};    // frames a stop cut short in the engine (Ctrl-C on a slow CPU engine)
  std::atomic<bool> ready{false};          // the engine is built and every stream started
  void add_batch(size_t size, double ms);
};

int64_t steady_ns(Clock::time_point t);
Clock::time_point from_steady_ns(int64_t ns);

}  // namespace vc::pipeline
