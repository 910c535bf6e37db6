// Where labelled frames go: an MP4/MKV file (H.264 by x264enc or NVENC), a window, an RTSP server, or nowhere.
// Files are always finalized: finish() sends end-of-stream and waits for the muxer to write its index.
#pragma once
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "config/config.hpp"

namespace vc::pipeline {

class Output {
 public:
  // Throws UnavailableError (missing elements, port in use), NoInputError (unwritable path).
  static std::unique_ptr<Output> open(const config::Output& output, int width, int height, double fps);
  virtual ~Output() = default;

  // A BGR frame of the size given at open(). Blocks when the encoder falls behind (files lose nothing).
  virtual void push(const cv::Mat& bgr) = 0;
  // Ends the stream and waits until it is written. Safe to call twice.
  virtual void finish() = 0;
  [[nodiscard]] virtual std::string description() const = 0;
};

}  // namespace vc::pipeline
