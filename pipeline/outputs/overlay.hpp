// Draws the classification onto a frame with OpenCV (core/imgproc only): a panel in a corner with a headline (this
// frame's top-1 or the label over the last frames, marked as which), the top-k labels with confidence bars, frames
// per second, latency, and the stream, source and time. Sized to the frame: legible on 1080p and on 320x240 (where it
// shows fewer lines rather than smaller text), never more than about half of a small frame.
#pragma once
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "config/config.hpp"
#include "inference/postprocess.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/stats.hpp"

namespace vc::pipeline {

struct OverlayContent {
  std::vector<inference::Prediction> top;  // best first, scores are probabilities
  std::string headline;                    // the big label ("" = none)
  float headline_score = -1;               // < 0: no score shown (e.g. "uncertain")
  std::string headline_kind;               // what the headline is: "smoothed over 5 frames", "this frame"
  std::string stable;                      // top1 headline: the smoothed label when it differs ("" = none)
  float stable_score = -1;
  std::string stable_kind;                 // what that is: "over the last ~5 frames"
  std::string title;                       // a tile of a mosaic: its stream's name, large, first
  double fps = 0;                          // 0 = not known yet ("-- fps"); < 0: none (a still image)
  double latency_ms = -1;                  // < 0: not shown
  std::string latency_label = "latency";   // "latency" (capture to result) or "processing" (files)
  std::string stream, source, timestamp;   // footer
  std::string engine, model;
};

// What the overlay shows for one result of a stream. The headline is what the eye checks against the list under
// it: this frame's top-1 (overlay.headline: top1, the default), with the smoothed label beside it, marked "over the
// last ~N frames", while the two differ — or the smoothed label itself (overlay.headline: smoothed), marked as such.
// Still images show no frame rate and no timestamp (they have neither).
struct OverlayMaker {
  config::Overlay style;
  int smoothing_window = 1;
  std::string engine, model;
  [[nodiscard]] OverlayContent make(const FrameResult& r, const StreamStats& s, int64_t timestamp_ns) const;
};

// Draws onto `bgr` (CV_8UC3): text never smaller than about 9 pixels (a small frame shows fewer lines, the least
// needed first to go: the engine, the footer, the rates, the runners-up), on a backing panel. Returns what it drew.
struct DrawnOverlay {
  cv::Rect panel;
  int headline_px = 0;  // the headline's text height
  int lines = 0;        // lines shown
};
DrawnOverlay draw_overlay(cv::Mat& bgr, const OverlayContent& content, const config::Overlay& style);

// Draws each region's box onto `bgr` — the picture as shown, at its own size — with its name, its label (the smoothed
// one, as the headline is) and the confidence on a backing above the box. Returns how many boxes it drew.
int draw_regions(cv::Mat& bgr, const std::vector<FrameResult>& regions, const config::Overlay& style);

// "00:01:02.345" from nanoseconds; "" for negative values.
std::string format_timestamp(int64_t ns);

}  // namespace vc::pipeline
