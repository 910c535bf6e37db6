#include "pipeline/outputs/overlay.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

namespace vc::pipeline {
namespace {

cv::Scalar bgr(const config::Rgb& c) { return cv::Scalar(c[2], c[1], c[0]); }

struct Line {
  std::string text;
  double size = 1.0;   // relative to the base font scale
  float bar = -1;      // 0..1 confidence bar under the text, or -1 for none
  std::string right;   // right-aligned text (the percentage)
  int priority = 0;    // 0: always shown; higher: dropped first when a small frame has no room
};

// The smallest base scale: Hershey text is about 9 pixels high at 0.4, the least a person reads on a small frame.
constexpr double kMinScale = 0.4;

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

struct Layout {
  double scale;
  int thickness, pad, bar_h;
  int text_h(double size) const {
    int baseline = 0;
    return cv::getTextSize("Ag", kFont, scale * size, thickness, &baseline).height;
  }
  int width_of(const std::string& s, double size) const {
    int baseline = 0;
    return cv::getTextSize(s, kFont, scale * size, thickness, &baseline).width;
  }
  int line_h(const Line& l) const { return int(text_h(l.size) * 1.45) + pad / 2 + (l.bar >= 0 ? bar_h + pad / 2 : 0); }
};

Layout layout_for(double scale) {
  Layout L{scale, std::max(1, int(std::lround(scale * 1.8))), 0, 0};
  L.pad = std::max(3, L.text_h(1.0) / 2);
  L.bar_h = std::max(2, L.text_h(1.0) / 3);
  return L;
}

cv::Size panel_size(const std::vector<Line>& lines, const Layout& L) {
  int width = 0, height = L.pad;
  for (const auto& l : lines) {
    width = std::max(width, L.width_of(l.text, l.size) + (l.right.empty() ? 0 : L.width_of(l.right, l.size) + 3 * L.pad));
    height += L.line_h(l);
  }
  return {width + 2 * L.pad, height + L.pad / 2};
}

}  // namespace

OverlayContent OverlayMaker::make(const FrameResult& r, const StreamStats& s, int64_t timestamp_ns) const {
  OverlayContent c;
  c.top = r.top;
  const bool image = r.still_image;
  const bool smoothed = style.headline == config::Headline::Smoothed && r.smoothed.index >= 0;
  if (smoothed) {
    c.headline = r.uncertain ? "uncertain" : r.smoothed.label;
    c.headline_score = r.uncertain ? -1.f : r.smoothed.score;
    c.headline_kind = smoothing_window > 1 ? fmt::format("over the last ~{} frames", smoothing_window) : "smoothed";
    // The headline is the smoothed label; the top-k lines below are this frame's own.
  } else if (!r.top.empty()) {
    c.headline = r.top.front().label;
    c.headline_score = r.top.front().score;
    c.headline_kind = image ? "this image" : "this frame";
    c.top.erase(c.top.begin());  // the headline already is the top-1: list the runners-up only
    if (r.smoothed.index >= 0 && r.smoothed.index != r.top.front().index) {
      c.stable = r.uncertain ? "uncertain" : r.smoothed.label;
      c.stable_score = r.uncertain ? -1.f : r.smoothed.score;
      c.stable_kind = smoothing_window > 1 ? fmt::format("over the last ~{} frames", smoothing_window) : "smoothed";
    }
  }
  if (!r.finite) {
    c.headline = "invalid output (NaN)";
    c.headline_score = -1;
    c.stable.clear();
  }
  c.fps = image ? -1 : s.rate.per_second(Clock::now());
  if (s.live) {
    c.latency_ms = r.latency_ms;
  } else {
    c.latency_ms = r.stages.inference_ms + r.stages.post_ms;  // queueing behind a fast file is not latency
    c.latency_label = "processing";
  }
  c.stream = r.stream_name;
  c.source = std::filesystem::path(r.source).filename().string();
  c.timestamp = image ? "" : format_timestamp(timestamp_ns);
  c.engine = engine;
  c.model = model;
  return c;
}

std::string format_timestamp(int64_t ns) {
  if (ns < 0) return "";
  const int64_t ms = ns / 1'000'000;
  return fmt::format("{:02}:{:02}:{:02}.{:03}", ms / 3'600'000, (ms / 60'000) % 60, (ms / 1000) % 60, ms % 1000);
}

DrawnOverlay draw_overlay(cv::Mat& image, const OverlayContent& c, const config::Overlay& style) {
  if (!style.enabled || image.empty()) return {};
  std::vector<Line> lines;
  if (!c.title.empty()) lines.push_back({c.title, 1.2, -1, "", 0});
  if (!c.headline.empty()) {
    lines.push_back({c.headline, 1.6, -1, c.headline_score >= 0 ? fmt::format("{:.0f}%", c.headline_score * 100) : "", 0});
    if (!c.headline_kind.empty()) lines.push_back({c.headline_kind, 0.7, -1, "", 1});
    if (!c.stable.empty()) {
      lines.push_back({(c.stable_kind.empty() ? "smoothed" : c.stable_kind) + ": " + c.stable, 0.8, -1,
                       c.stable_score >= 0 ? fmt::format("{:.0f}%", c.stable_score * 100) : "", 2});
    }
  }
  for (const auto& p : c.top) lines.push_back({p.label, 1.0, p.score, fmt::format("{:.1f}%", p.score * 100), 3});
  std::string stats;
  if (style.show_fps && c.fps >= 0) stats += c.fps > 0 ? fmt::format("{:.1f} fps", c.fps) : "-- fps";
  if (style.show_latency && c.latency_ms >= 0) {
    stats += fmt::format("{}{} {:.1f} ms", stats.empty() ? "" : "   ", c.latency_label, c.latency_ms);
  }
  if (!stats.empty()) lines.push_back({stats, 0.8, -1, "", 4});
  std::string footer = c.title.empty() ? c.stream : "";
  if (!c.source.empty()) footer += (footer.empty() ? "" : " | ") + c.source;
  if (!c.timestamp.empty()) footer += (footer.empty() ? "" : " | ") + c.timestamp;
  if (!footer.empty()) lines.push_back({footer, 0.7, -1, "", 5});
  if (!c.engine.empty() || !c.model.empty()) lines.push_back({fmt::format("{} | {}", c.model, c.engine), 0.7, -1, "", 6});

  // Scaled with the frame, but never below a legible size: where the panel would take more than 45 % of the width or
  // 60 % of the height, the least needed lines go first; only the headline itself is ever made smaller.
  const auto fits = [&](const cv::Size& s) { return s.width <= image.cols * 0.45 && s.height <= image.rows * 0.6; };
  double scale = std::max(style.font_scale * image.rows / 720.0, kMinScale);
  Layout L = layout_for(scale);
  for (int least = 6; least > 0 && !fits(panel_size(lines, L)); --least) {
    while (!fits(panel_size(lines, L))) {
      const auto it = std::find_if(lines.rbegin(), lines.rend(), [&](const Line& l) { return l.priority == least; });
      if (it == lines.rend()) break;
      lines.erase(std::next(it).base());
    }
  }
  for (int i = 0; i < 12 && !fits(panel_size(lines, L)) && scale >= 0.2; ++i) {
    scale *= 0.85;
    L = layout_for(scale);
  }
  const cv::Size size = panel_size(lines, L);
  const int width = std::min(size.width, image.cols), height = std::min(size.height, image.rows);
  const int margin = std::max(0, std::min(L.pad * 2, std::min(image.cols - width, image.rows - height) / 2));
  const bool right = style.position == config::Corner::TopRight || style.position == config::Corner::BottomRight;
  const bool bottom = style.position == config::Corner::BottomLeft || style.position == config::Corner::BottomRight;
  const cv::Rect panel(right ? image.cols - width - margin : margin, bottom ? image.rows - height - margin : margin, width,
                       height);

  if (style.background_alpha > 0) {  // a translucent panel keeps text legible on bright and dark frames
    cv::Mat roi = image(panel);
    cv::Mat fill(roi.size(), roi.type(), bgr(style.background_color));
    cv::addWeighted(fill, style.background_alpha, roi, 1.0 - style.background_alpha, 0.0, roi);
  }
  int y = panel.y + L.pad;
  for (const auto& l : lines) {
    const int th = L.text_h(l.size);
    const int baseline_y = y + th;
    const double s = L.scale * l.size;
    const int t = l.size > 1.2 ? L.thickness + 1 : L.thickness;
    auto put = [&](const std::string& text, int x) {
      // A dark outline under the text: readable even where the panel is transparent.
      cv::putText(image, text, {x, baseline_y}, kFont, s, cv::Scalar(0, 0, 0), t + 2, cv::LINE_AA);
      cv::putText(image, text, {x, baseline_y}, kFont, s, bgr(style.text_color), t, cv::LINE_AA);
    };
    put(l.text, panel.x + L.pad);
    if (!l.right.empty()) put(l.right, panel.x + panel.width - L.pad - L.width_of(l.right, l.size));
    y += int(th * 1.45) + L.pad / 2;
    if (l.bar >= 0) {
      // A bar of a few pixels reads as noise: scores too small to show one get none (the percentage says it).
      const int full = panel.width - 2 * L.pad;
      const int w = int(full * std::clamp(std::isfinite(l.bar) ? l.bar : 0.f, 0.f, 1.f));
      if (w >= std::max(3, L.bar_h)) {
        const cv::Rect bar(panel.x + L.pad, y - L.pad / 4, w, L.bar_h);
        cv::rectangle(image, bar & cv::Rect(0, 0, image.cols, image.rows), bgr(style.bar_color), cv::FILLED);
      }
      y += L.bar_h + L.pad / 2;
    }
  }
  DrawnOverlay drawn{panel, 0, int(lines.size())};
  for (const auto& l : lines) {
    if (l.size == 1.6) drawn.headline_px = L.text_h(l.size);
  }
  return drawn;
}

int draw_regions(cv::Mat& image, const std::vector<FrameResult>& regions, const config::Overlay& style) {
  if (!style.enabled || image.empty()) return 0;
  int drawn = 0;
  const Layout L = layout_for(std::max(style.font_scale * 0.8 * image.rows / 720.0, kMinScale));
  for (const auto& r : regions) {
    const cv::Rect box = cv::Rect(r.box.x, r.box.y, r.box.width, r.box.height) & cv::Rect(0, 0, image.cols, image.rows);
    if (box.empty()) continue;
    const bool have = r.finite && !r.top.empty();
    const bool smoothed = r.smoothed.index >= 0;
    std::string label = !have ? "?" : smoothed ? (r.uncertain ? "uncertain" : r.smoothed.label) : r.top.front().label;
    const float score = !have ? -1.f : smoothed ? (r.uncertain ? -1.f : r.smoothed.score) : r.top.front().score;
    const auto text = fmt::format("{}: {}{}", r.region, label, score >= 0 ? fmt::format(" {:.0f}%", score * 100) : "");
    cv::rectangle(image, box, cv::Scalar(0, 0, 0), L.thickness + 2, cv::LINE_AA);
    cv::rectangle(image, box, bgr(style.bar_color), L.thickness, cv::LINE_AA);
    const int th = L.text_h(0.9), tw = L.width_of(text, 0.9);
    // Above the box when there is room, else inside its top edge.
    const int top = box.y - th - 2 * L.pad >= 0 ? box.y - th - 2 * L.pad : box.y;
    const cv::Rect backing = cv::Rect(box.x, top, tw + 2 * L.pad, th + 2 * L.pad) & cv::Rect(0, 0, image.cols, image.rows);
    if (!backing.empty()) {
      cv::Mat roi = image(backing);
      cv::Mat fill(roi.size(), roi.type(), bgr(style.background_color));
      cv::addWeighted(fill, std::max(0.5, style.background_alpha), roi, 1.0 - std::max(0.5, style.background_alpha), 0.0, roi);
      cv::putText(image, text, {backing.x + L.pad, backing.y + L.pad + th}, kFont, L.scale * 0.9, bgr(style.text_color),
                  L.thickness, cv::LINE_AA);
    }
    ++drawn;
  }
  return drawn;
}

}  // namespace vc::pipeline
