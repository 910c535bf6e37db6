// Where frames come from: a webcam (v4l2src), a video file (decodebin), a network or file URI (uridecodebin),
// images (each decoded by GStreamer) or a test pattern (videotestsrc) — all delivered as BGR frames through an
// appsink. Live sources drop stale frames (latest wins, drops counted); files never drop (back-pressure).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "inference/preprocess.hpp"

namespace vc::pipeline {

using Clock = std::chrono::steady_clock;

// A decoded frame. Holds its GStreamer buffer mapped for as long as the Frame lives.
struct Frame {
  std::shared_ptr<const void> holder;  // keeps the sample mapped
  inference::FrameView view;           // BGR, planes[0] valid while `holder` lives
  int64_t index = 0;                   // 0, 1, 2, … in arrival order (dropped frames are skipped)
  int64_t pts_ns = -1;                 // presentation time from the source, -1 if unknown
  Clock::time_point captured;          // when the app received it
};

class Source {
 public:
  // Opens and starts the source described by `input`. Throws NoInputError (missing file/device),
  // DataError (unreadable media), UnavailableError (missing element, camera mode not offered).
  static std::unique_ptr<Source> open(const config::Input& input);
  virtual ~Source() = default;

  // The next frame; nullopt at the end of the input. Throws on a pipeline error (with the element and the
  // GStreamer message) or when no frame arrives in time.
  virtual std::optional<Frame> next() = 0;
  // A frame only if one is already waiting (to batch frames that queued up); never blocks.
  virtual std::optional<Frame> poll() { return std::nullopt; }

  [[nodiscard]] virtual bool live() const = 0;
  [[nodiscard]] virtual int64_t dropped() const = 0;
  [[nodiscard]] virtual double fps() const = 0;            // nominal frame rate, 0 if unknown
  [[nodiscard]] virtual int64_t total_frames() const = 0;  // estimate for files, -1 if unknown
  [[nodiscard]] virtual std::string description() const = 0;
};

// Cameras GStreamer can see, with their modes, for error messages ("/dev/video0 (HD Webcam): 1280x720@30 MJPEG, …").
std::string describe_cameras();

}  // namespace vc::pipeline
