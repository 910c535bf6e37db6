// The latest labelled frame of each stream as a JPEG, for the service (snapshot.jpg, live.mjpeg, the web page's
// tiles). Nothing is converted or encoded until someone asks: a request flags its stream, the post stage hands over
// the stream's next frame (a reference, at once), and the request's own thread copies it to host memory, draws the
// overlay and encodes it. A stream's image is made at most every `min_interval`; requests in between share it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <opencv2/core.hpp>

#include "pipeline/core/control.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/outputs/overlay.hpp"

namespace vc::pipeline {

class Snapshots {
 public:
  // `capacity`: the most streams the run may have (ids below it).
  Snapshots(size_t capacity, std::chrono::milliseconds min_interval, OverlayMaker overlay);

  // The post stage's side: which streams want a frame, and the frame (its thread; never waits for an encoder).
  [[nodiscard]] const std::deque<std::atomic<bool>>* wanted() const { return &wanted_; }
  void take(const std::shared_ptr<const Frame>& frame, const FrameResult& result);

  // The stream's latest labelled frame as JPEG, at most `max_width` wide (0: as it is): a fresh one when the last is
  // older than the interval (waiting up to `wait` for the stream's next frame), else the last. Empty when the stream
  // never had a frame within the wait. Throws vc::Error when the frame cannot be read or encoded.
  // A stream takes over `stream`'s slot: nothing of the one before is shown.
  void reset(int stream);

  // `clean`: the frame without the overlay (a page that prints the label under the picture itself).
  std::optional<Snapshot> jpeg(int stream, const StreamStats& stats, int max_width, std::chrono::milliseconds wait,
                               bool clean = false);
  // The stream's latest frame without the overlay, cut to `box` (in its pixels; clamped to the picture), as a
  // training image: full resolution, JPEG quality 95, not kept. Made as jpeg() makes its image.
  std::optional<Snapshot> crop(int stream, const StreamStats& stats, const config::PixelBox& box,
                               std::chrono::milliseconds wait);
  // The JPEG sizes kept of the stream's last image (a few: a client asking for every width cannot grow them).
  [[nodiscard]] size_t widths_kept(int stream);

 private:
  struct Slot {
    std::mutex making;                      // one request makes the stream's image at a time; the others wait and share
    std::shared_ptr<const Frame> frame;     // handed over by take(), not yet drawn (guarded by mutex_)
    FrameResult result;
    uint64_t taken = 0;                     // frames handed over so far (guarded by mutex_)
    bool waiting = false;                   // a request waits for the next frame (guarded by mutex_)
    cv::Mat labelled;                       // the last image made, with its overlay (guarded by making)
    cv::Mat clean;                          // the same without it
    FrameResult shown;                      // its result
    Clock::time_point made{};
    std::map<int, std::string> encoded;     // that image as JPEG, by 2 x width + clean
  };

  std::chrono::milliseconds min_interval_;
  OverlayMaker overlay_;
  std::deque<std::atomic<bool>> wanted_;
  std::deque<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable taken_;
};

}  // namespace vc::pipeline
