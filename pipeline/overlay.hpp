// Draws the classification onto a frame with OpenCV (core/imgproc only): a translucent panel in a corner with the
// top-k labels and confidence bars, the smoothed label, FPS, latency, engine and model.
#pragma once
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "config/config.hpp"
#include "inference/postprocess.hpp"

namespace vc::pipeline {

struct OverlayContent {
  std::vector<inference::Prediction> top;  // best first, scores are probabilities
  std::string smoothed_label;              // "" to leave out
  float smoothed_score = 0;
  bool uncertain = false;
  double fps = 0;
  double latency_ms = 0;
  std::string engine, model;
};

// Draws onto `bgr` (CV_8UC3). Returns the panel's rectangle (for tests).
cv::Rect draw_overlay(cv::Mat& bgr, const OverlayContent& content, const config::Overlay& style);

}  // namespace vc::pipeline
