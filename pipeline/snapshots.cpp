#include "pipeline/snapshots.hpp"

#include <opencv2/imgproc.hpp>

#include "pipeline/outputs/appsrc_feed.hpp"
#include "pipeline/outputs/frame_image.hpp"
#include "pipeline/sources/gst_cuda.hpp"

namespace vc::pipeline {
namespace {

constexpr size_t kWidthsKept = 4;  // JPEG sizes of one picture kept at once

}  // namespace

Snapshots::Snapshots(size_t capacity, std::chrono::milliseconds min_interval, OverlayMaker overlay)
    : min_interval_(min_interval), overlay_(std::move(overlay)), wanted_(capacity), slots_(capacity) {}

void Snapshots::take(const std::shared_ptr<const Frame>& frame, const FrameResult& result) {
  const auto s = size_t(result.stream);
  if (s >= slots_.size() || !frame) return;
  {
    std::lock_guard lock(mutex_);
    Slot& slot = slots_[s];
    if (!slot.waiting) return;  // its request gave up meanwhile: no decoder buffer is kept for nobody
    slot.frame = frame;
    slot.result = result;
    ++slot.taken;
  }
  wanted_[s].store(false, std::memory_order_relaxed);
  taken_.notify_all();
}

void Snapshots::reset(int stream) {
  const auto s = size_t(stream);
  if (s >= slots_.size()) return;
  Slot& slot = slots_[s];
  std::lock_guard making(slot.making);
  {
    std::lock_guard lock(mutex_);
    slot.frame.reset();
  }
  slot.labelled.release();
  slot.encoded.clear();
  slot.shown = {};
}

std::optional<Snapshot> Snapshots::jpeg(int stream, const StreamStats& stats, int max_width,
                                            std::chrono::milliseconds wait, bool clean) {
  const auto s = size_t(stream);
  if (s >= slots_.size()) return std::nullopt;
  Slot& slot = slots_[s];
  std::lock_guard making(slot.making);
  if (slot.labelled.empty() || Clock::now() - slot.made >= min_interval_) {
    std::shared_ptr<const Frame> frame;
    FrameResult result;
    {
      std::unique_lock lock(mutex_);
      const uint64_t before = slot.taken;
      slot.waiting = true;
      wanted_[s].store(true, std::memory_order_relaxed);
      taken_.wait_for(lock, wait, [&] { return slot.taken != before; });
      wanted_[s].store(false, std::memory_order_relaxed);
      slot.waiting = false;
      frame = std::move(slot.frame);  // (the frame's memory goes back to its decoder as soon as it is drawn)
      slot.frame.reset();
      result = slot.result;
    }
    if (frame) {
      const Frame host = in_host_memory(*frame);
      frame.reset();
      cv::Mat image = to_bgr(host.view);
      slot.clean = image.clone();
      draw_overlay(image, overlay_.make(result, stats, result.pts_ns), overlay_.style);
      slot.labelled = std::move(image);
      slot.shown = std::move(result);
      slot.made = Clock::now();
      slot.encoded.clear();
    }
  }
  if (slot.labelled.empty()) return std::nullopt;
  // (even sides: the encoder takes 4:2:0, whose chroma planes halve them)
  const int width = std::max(2, (max_width > 0 && max_width < slot.labelled.cols ? max_width : slot.labelled.cols) & ~1);
  const int height = std::max(2, (slot.labelled.rows * width / slot.labelled.cols) & ~1);
  const cv::Mat& picture = clean ? slot.clean : slot.labelled;
  const int key = 2 * width + (clean ? 1 : 0);
  auto it = slot.encoded.find(key);
  if (it == slot.encoded.end()) {
    cv::Mat scaled = picture;
    if (width != picture.cols || height != picture.rows) cv::resize(picture, scaled, cv::Size(width, height), 0, 0, cv::INTER_AREA);
    // A few widths at once (a page's tiles, a thumbnail): a client asking for every width cannot grow this.
    if (slot.encoded.size() >= kWidthsKept) slot.encoded.clear();
    it = slot.encoded.emplace(key, encode_jpeg(scaled)).first;
  }
  Snapshot out{it->second, {}, 0, slot.shown.frame};
  out.pts_s = slot.shown.pts_ns >= 0 ? double(slot.shown.pts_ns) / 1e9 : -1;
  if (!slot.shown.top.empty()) {
    out.label = slot.shown.top.front().label;
    out.score = slot.shown.top.front().score;
  }
  return out;
}

std::optional<Snapshot> Snapshots::crop(int stream, const StreamStats& stats, const config::PixelBox& box,
                                        std::chrono::milliseconds wait) {
  auto out = jpeg(stream, stats, 0, wait, true);  // (the slot's image made fresh, as a snapshot's is)
  if (!out) return out;
  Slot& slot = slots_[size_t(stream)];
  std::lock_guard making(slot.making);
  const cv::Rect inside = cv::Rect(box.x, box.y, box.width, box.height) & cv::Rect(0, 0, slot.clean.cols, slot.clean.rows);
  if (inside.width < 2 || inside.height < 2) return std::nullopt;
  // (even sides: the encoder takes 4:2:0)
  out->jpeg = encode_jpeg(slot.clean(cv::Rect(inside.x, inside.y, inside.width & ~1, inside.height & ~1)).clone(), 95);
  out->frame = slot.shown.frame;
  out->pts_s = slot.shown.pts_ns >= 0 ? double(slot.shown.pts_ns) / 1e9 : -1;
  return out;
}

size_t Snapshots::widths_kept(int stream) {
  Slot& slot = slots_.at(size_t(stream));
  std::lock_guard making(slot.making);
  return slot.encoded.size();
}

}  // namespace vc::pipeline
