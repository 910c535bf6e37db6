#include "pipeline/overlay.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

namespace vc::pipeline {
namespace {

cv::Scalar bgr(const config::Rgb& c) { return cv::Scalar(c[2], c[1], c[0]); }

struct Line {
  std::string text;
  float bar = -1;  // 0..1 confidence bar under the text, or -1 for none
};

}  // namespace

cv::Rect draw_overlay(cv::Mat& image, const OverlayContent& c, const config::Overlay& style) {
  if (!style.enabled || image.empty()) return {};
  const double scale = style.font_scale * std::max(0.5, image.rows / 720.0);  // legible at any resolution
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  const int thickness = std::max(1, int(scale * 2));
  int baseline = 0;
  const int text_h = cv::getTextSize("Ag", font, scale, thickness, &baseline).height;
  const int pad = std::max(4, text_h / 2), bar_h = std::max(3, text_h / 3), line_h = text_h + baseline + pad;

  std::vector<Line> lines;
  if (!c.smoothed_label.empty()) {
    lines.push_back({c.uncertain ? fmt::format("uncertain ({} {:.0f}%)", c.smoothed_label, c.smoothed_score * 100)
                                 : fmt::format("{} {:.0f}%", c.smoothed_label, c.smoothed_score * 100)});
  }
  for (const auto& p : c.top) lines.push_back({fmt::format("{:.1f}% {}", p.score * 100, p.label), p.score});
  std::string stats;
  if (style.show_fps) stats += fmt::format("{:.1f} fps", c.fps);
  if (style.show_latency) stats += fmt::format("{}{:.1f} ms", stats.empty() ? "" : "  ", c.latency_ms);
  if (!stats.empty()) lines.push_back({stats});
  if (!c.engine.empty() || !c.model.empty()) lines.push_back({fmt::format("{} | {}", c.model, c.engine)});

  int width = 0, height = pad;
  for (const auto& l : lines) {
    width = std::max(width, cv::getTextSize(l.text, font, scale, thickness, &baseline).width);
    height += line_h + (l.bar >= 0 ? bar_h + pad / 2 : 0);
  }
  width = std::min(width + 2 * pad, image.cols);
  height = std::min(height, image.rows);
  const int margin = std::min(pad * 2, std::min(image.cols - width, image.rows - height) / 2);
  const bool right = style.position.find("right") != std::string::npos;
  const bool bottom = style.position.find("bottom") != std::string::npos;
  const cv::Rect panel(right ? image.cols - width - margin : margin, bottom ? image.rows - height - margin : margin, width,
                       height);

  if (style.background_alpha > 0) {  // a translucent panel keeps text legible on bright and dark frames
    cv::Mat roi = image(panel);
    cv::Mat fill(roi.size(), roi.type(), bgr(style.background_color));
    cv::addWeighted(fill, style.background_alpha, roi, 1.0 - style.background_alpha, 0.0, roi);
  }
  int y = panel.y + pad;
  for (const auto& l : lines) {
    y += text_h;
    // A dark outline under the text: readable even where the panel is transparent.
    cv::putText(image, l.text, {panel.x + pad, y}, font, scale, cv::Scalar(0, 0, 0), thickness + 2, cv::LINE_AA);
    cv::putText(image, l.text, {panel.x + pad, y}, font, scale, bgr(style.text_color), thickness, cv::LINE_AA);
    y += baseline + pad;
    if (l.bar >= 0) {
      const int full = panel.width - 2 * pad;
      const cv::Rect bar(panel.x + pad, y - pad / 2, std::max(1, int(full * std::clamp(l.bar, 0.f, 1.f))), bar_h);
      cv::rectangle(image, bar & cv::Rect(0, 0, image.cols, image.rows), bgr(style.bar_color), cv::FILLED);
      y += bar_h + pad / 2;
    }
  }
  return panel;
}

}  // namespace vc::pipeline
