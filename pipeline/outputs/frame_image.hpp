// A decoded frame as an OpenCV BGR image, for the overlay and the video outputs (only streams that have an output
// pay for this conversion), and fitting an image into another size with letterbox bars.
#pragma once
#include <opencv2/core.hpp>

#include "inference/preprocess.hpp"

namespace vc::pipeline {

// A BGR copy of a host frame (NV12, I420, their 10-bit forms — drawn from their top 8 bits — BGR, BGRx, RGB, RGBA),
// upright (its rotation applied). YUV frames of odd size lose their last column or row (4:2:0 needs even sizes).
// Throws vc::InternalError for a frame in GPU memory.
cv::Mat to_bgr(const inference::FrameView& frame);

// `image` scaled to fit `size` (aspect kept, black bars), or `image` itself when it already has that size.
cv::Mat fit_into(const cv::Mat& image, cv::Size size);

}  // namespace vc::pipeline
