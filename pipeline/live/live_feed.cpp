#include "pipeline/live/live_feed.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "pipeline/core/control.hpp"
#include "pipeline/live/fmp4_remuxer.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {
namespace {

constexpr size_t kMaxGopBytes = size_t(16) << 20;  // a group of pictures kept for joiners (beyond: they wait for a key)
constexpr size_t kTimesKept = 1024;                // pictures whose place in the video is kept (over 30 s at 30 fps)
constexpr int64_t kMaxJumpNs = 5'000'000'000;      // a stream time that jumps further ahead than this is a new timeline

}  // namespace

LiveFeed::LiveFeed(std::string what) : what_(std::move(what)) {}

LiveFeed::~LiveFeed() {
  std::unique_ptr<Fmp4Remuxer> remuxer;
  {
    std::lock_guard lock(mutex_);
    end_viewers();
    remuxer = std::move(remuxer_);
  }
  // (stopped outside the lock: its thread may be waiting for it)
}

std::shared_ptr<void> LiveFeed::watch(Viewer viewer, uint64_t& session) {
  std::lock_guard lock(mutex_);
  if (ended_) throw RequestError(503, fmt::format("{} has ended", what_));
  if (caps_ && !mp4_parser(caps_.get())) {
    throw RequestError(415, fmt::format("{}: its video is neither H.264 nor H.265 (watch live.mjpeg instead)", what_));
  }
  drop_released();  // (a page that reconnects to a stream with no packets now: the entries stay few)
  Entry entry{++next_viewer_, std::move(viewer), false, std::make_shared<std::atomic<bool>>(true)};
  session = remuxer_ ? session_ : session_ + 1;  // (the next session starts at the next keyframe)
  if (remuxer_ && !init_.empty()) {  // a session runs: the picture at once, from the last keyframe
    bool open = entry.viewer.send(init_, false);
    for (size_t i = 0; open && i < gop_.size(); ++i) {
      open = entry.viewer.send(gop_[i], i == 0);
      entry.synced = true;
    }
  }
  auto held = entry.held;
  viewers_.push_back(std::move(entry));
  // The handle: releasing it lets the viewer go (the muxer stops with the next packet after the last has gone). It
  // only says so — it may be released on any thread, in a viewer's own send(), after the feed is gone.
  return std::shared_ptr<void>(nullptr, [held](void*) { *held = false; });
}

void LiveFeed::drop_released() {
  std::erase_if(viewers_, [](const Entry& e) { return !*e.held; });
}

bool LiveFeed::watched() const {
  std::lock_guard lock(mutex_);
  // (while a muxer runs too: the next packet stops it once nobody watches — a raw source that stopped encoding
  // would never bring one)
  return remuxer_ || std::any_of(viewers_.begin(), viewers_.end(), [](const Entry& e) { return bool(*e.held); });
}

std::optional<LiveFeed::LiveTime> LiveFeed::live_time(int64_t pts_ns) const {
  std::lock_guard lock(mutex_);
  if (!remuxer_ || pts_ns < 0) return std::nullopt;
  for (auto it = times_.rbegin(); it != times_.rend(); ++it) {  // the newest: a looping file repeats its times
    if (it->first == pts_ns) return LiveTime{session_, double(it->second) / 1e9};
  }
  return std::nullopt;
}

void LiveFeed::end() {
  std::unique_ptr<Fmp4Remuxer> remuxer;
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    end_viewers();
    remuxer = std::move(remuxer_);
  }
}

void LiveFeed::end_viewers() {
  for (auto& e : viewers_) {
    if (e.viewer.end) e.viewer.end();
  }
  viewers_.clear();
}

void LiveFeed::packet(const Packet& p) {
  std::unique_ptr<Fmp4Remuxer> stopped;  // a muxer stopped here, after the lock
  std::lock_guard lock(mutex_);
  const bool new_format = p.caps && caps_ && p.caps != caps_ && !gst_caps_is_equal(p.caps.get(), caps_.get());
  if (p.caps) caps_ = p.caps;
  if (ended_) return;
  if (new_format && remuxer_) {  // another picture size or codec: its viewers start again with a new init segment
    vc::log::get("pipeline")->info("{}: its video changed format; live viewers reconnect", what_);
    end_viewers();
  } else if (caps_ && !mp4_parser(caps_.get())) {
    end_viewers();  // (those who came before its first packet said what it is)
  }
  drop_released();
  if (viewers_.empty()) {
    if (remuxer_) stopped = std::move(remuxer_);
    return;
  }
  if (!remuxer_) {
    if (!p.keyframe || !caps_ || !mp4_parser(caps_.get())) return;
    try {
      remuxer_ = start_session(p);
    } catch (const std::exception& e) {
      vc::log::get("pipeline")->warn("{}: no live video: {}", what_, e.what());
      end_viewers();
      return;
    }
  }
  if (need_key_ && !p.keyframe) return;
  int64_t pts = 0, dts = 0;
  if (!timeline(p, pts, dts)) return;
  if (!remuxer_->push(p, pts, dts)) {
    if (auto why = remuxer_->error()) {
      vc::log::get("pipeline")->warn("{}: the live view stopped: {}", what_, *why);
      end_viewers();
      stopped = std::move(remuxer_);
      return;
    }
    need_key_ = true;  // the muxer is behind: the picture resumes at the next keyframe
    return;
  }
  need_key_ = false;
  times_.emplace_back(p.pts_ns, pts);
  if (times_.size() > kTimesKept) times_.pop_front();
}

std::unique_ptr<Fmp4Remuxer> LiveFeed::start_session(const Packet& p) {
  const uint64_t session = ++session_;
  init_.clear();
  gop_.clear();
  gop_bytes_ = 0;
  times_.clear();
  base_ns_ = std::min(p.dts_ns >= 0 ? p.dts_ns : p.pts_ns, p.pts_ns >= 0 ? p.pts_ns : p.dts_ns);
  offset_ns_ = 0;
  last_dts_ = -1;
  need_key_ = true;
  for (auto& e : viewers_) e.synced = false;
  Fmp4Remuxer::Output out{[this, session](std::string init) { on_init(session, std::move(init)); },
                          [this, session](std::string bytes, bool key) { on_fragment(session, std::move(bytes), key); }};
  return std::make_unique<Fmp4Remuxer>(caps_, std::move(out), what_ + " (live view)");
}

// The packet's times on the session's timeline: increasing decode times, from 0, across a loop's rewind or a jump.
bool LiveFeed::timeline(const Packet& p, int64_t& pts, int64_t& dts) {
  const int64_t raw_dts = p.dts_ns >= 0 ? p.dts_ns : p.pts_ns;
  if (raw_dts < 0) {  // no time: nowhere to put it (and the pictures after it may refer to it)
    need_key_ = true;
    return false;
  }
  dts = raw_dts - base_ns_ + offset_ns_;
  if (last_dts_ >= 0 && (dts <= last_dts_ || dts > last_dts_ + kMaxJumpNs)) {
    if (!p.keyframe) {  // a new timeline starts at a keyframe
      need_key_ = true;
      return false;
    }
    offset_ns_ += last_dts_ + step_ns_ - dts;
    dts = last_dts_ + step_ns_;
  } else if (last_dts_ >= 0) {
    step_ns_ = std::clamp<int64_t>(dts - last_dts_, 1'000'000, 1'000'000'000);
  }
  pts = p.pts_ns >= 0 ? p.pts_ns - base_ns_ + offset_ns_ : dts;
  if (pts < 0) return false;  // a picture of the group before the session's first keyframe
  last_dts_ = dts;
  return true;
}

void LiveFeed::on_init(uint64_t session, std::string init) {
  std::lock_guard lock(mutex_);
  if (session != session_ || !remuxer_) return;
  init_ = std::move(init);
  std::erase_if(viewers_, [&](Entry& e) { return !*e.held || !e.viewer.send(init_, false); });
}

void LiveFeed::on_fragment(uint64_t session, std::string bytes, bool keyframe) {
  std::lock_guard lock(mutex_);
  if (session != session_ || !remuxer_) return;
  std::erase_if(viewers_, [&](Entry& e) {
    if (!*e.held) return true;
    if (!e.synced && !keyframe) return false;  // a joiner waits for a keyframe
    e.synced = true;
    return !e.viewer.send(bytes, keyframe);
  });
  if (keyframe) {
    gop_.clear();
    gop_bytes_ = 0;
  } else if (gop_.empty()) {
    return;  // the group was too large to keep: joiners wait for the next keyframe
  }
  gop_bytes_ += bytes.size();
  if (gop_bytes_ > kMaxGopBytes) {
    gop_.clear();
    gop_bytes_ = 0;
    return;
  }
  gop_.push_back(std::move(bytes));
}

}  // namespace vc::pipeline
