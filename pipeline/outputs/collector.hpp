// output.collect: the frames the model is unsure about (top-1 confidence below output.collect.below_confidence), kept
// for review — the next training set. Each is written as JPEG to DIR/PREDICTED_LABEL/STREAM-FRAME-PCT.jpg (the bare
// frame, as a training image must be; a region's: DIR/REGION/PREDICTED_LABEL/STREAM-REGION-FRAME-PCT.jpg, the region
// alone) with a line in DIR/collect.jsonl (file, stream, source, frame, time, the top
// labels and scores), at most output.collect.max_per_minute per stream per minute of stream time. A thread of its own
// writes them: a slow or full disk never holds the video back; what could not be written is counted and said. At most
// output.collect.max_frames wait for review (labelled or discarded in the page: service/api_datasets.cpp, which moves
// or removes their files): beyond, the oldest are dropped, counted in collect.jsonl's {"dropped_for_room": N} line.
// collect.jsonl is rewritten now and then from the frames still waiting, so that it stays the size of the queue.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/frame.hpp"

namespace vc::pipeline {

class Collector {
 public:
  // Throws vc::CantCreateError when the folder cannot be made. `capacity`: the most streams the run may have.
  Collector(const config::Output& settings, size_t capacity);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // From the post stage's thread: whether this result's frame is to be kept (below the threshold, within the
  // stream's rate) — then hand it over with take(), which never blocks.
  bool wants(const FrameResult& r);
  void take(std::shared_ptr<const Frame> frame, const FrameResult& r);
  // Writes what is queued, then stops.
  void finish();

  [[nodiscard]] int64_t saved() const { return saved_.load(); }
  // Frames waiting for review dropped so far to keep output.collect.max_frames (the oldest first).
  [[nodiscard]] int64_t dropped_for_room() const { return evicted_.load(); }
  [[nodiscard]] int64_t lost() const { return failures_.load() + dropped_.load(); }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  // Whether `file` (relative to the folder) is a name the collector gives a frame: LABEL/NAME.jpg or
  // REGION/LABEL/NAME.jpg, no "." or ".." (what the review queue accepts from collect.jsonl, hand-edited or not).
  static bool is_frame_file(const std::string& file);

 private:
  struct Job {
    std::shared_ptr<const Frame> frame;
    FrameResult result;
  };
  struct Kept {
    std::string file, line;  // relative to dir_; its collect.jsonl line
  };
  void work();
  void write(const Job& job);
  void load_index();
  void forget_reviewed();
  void compact();

  std::string dir_;
  double below_, per_minute_;
  size_t max_frames_, capacity_;
  std::deque<Kept> kept_;  // the frames waiting for review, oldest first (the writer's thread; the constructor's)
  std::set<std::string> names_;  // kept_'s files
  size_t appended_ = 0;    // lines added to collect.jsonl since it was last rewritten
  // By stream and region ("" = the whole picture): the stream time from which the next frame may be kept.
  std::map<std::pair<int, std::string>, int64_t> next_ns_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::atomic<int64_t> saved_{0}, failures_{0}, dropped_{0}, evicted_{0};
  int fd_ = -1;  // collect.jsonl
  std::thread thread_;
};

}  // namespace vc::pipeline
