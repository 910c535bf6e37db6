// A decoded frame on its way through the pipeline: its pixels (in host or GPU memory, as the view says), held by
// the GStreamer buffer they arrived in for as long as any stage still uses the frame, and where it came from.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "inference/preprocess.hpp"

namespace vc::pipeline {

using Clock = std::chrono::steady_clock;

struct Frame {
  std::shared_ptr<const void> holder;  // keeps the buffer mapped; the pixels are valid while it lives
  inference::FrameView view;           // view.memory: Host, or Device (NVDEC output in GPU memory)
  int stream = 0;                      // position of its stream in the run
  int64_t index = 0;                   // per stream: 0, 1, 2, … in arrival order (dropped frames leave gaps)
  int64_t pts_ns = -1;                 // presentation time from the source, -1 if unknown
  double fps = 0;                      // the stream's nominal frame rate, 0 if unknown
  Clock::time_point captured;          // when the app received it
  Clock::time_point batched;           // when the batcher took it
  std::string source;                  // image inputs: the image's file; else empty (the stream's own source)
  bool independent = false;            // images: unrelated to the previous frame (no smoothing across them)
  bool damaged = false;                // the decoder flagged it corrupt, or it is the first after a decode error
};

}  // namespace vc::pipeline
