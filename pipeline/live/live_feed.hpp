// One stream's live video for the service's viewers (live.mp4): its own packets remuxed into fragmented MP4 while
// someone watches — one muxer per stream, however many watch — never decoded or encoded. A viewer gets the init
// segment, the fragments since the last keyframe (the picture at once), then each fragment as it is made. The
// muxer's timeline runs on across a looping file's rewind or a restarted source, and the presentation time of each
// picture is kept, so that a result can say where in the video its frame is (live_time). The muxer starts with the
// first viewer and stops after the last.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/core/control.hpp"
#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

class Fmp4Remuxer;

class LiveFeed {
 public:
  using Viewer = LiveViewer;  // (core/control.hpp)
  // Where a frame is in a session's video: the session (a muxer's run) and the presentation time there.
  struct LiveTime {
    uint64_t session = 0;
    double t = 0;
  };

  explicit LiveFeed(std::string what);
  ~LiveFeed();
  LiveFeed(const LiveFeed&) = delete;
  LiveFeed& operator=(const LiveFeed&) = delete;

  // The stream's packets (its packet sink): from the source's thread, never blocks for long (the muxer starts or stops
  // here, when a first viewer came or the last went).
  void packet(const Packet& p);
  // A viewer joins; it watches as long as the handle is held. `session` is the session it will see. Throws
  // RequestError 415 when the stream's video cannot be remuxed (neither H.264 nor H.265), 503 when it has ended.
  [[nodiscard]] std::shared_ptr<void> watch(Viewer viewer, uint64_t& session);
  // Whether anyone watches, or a muxer still runs (a raw source encodes its packets only then: the next packet after
  // the last viewer has gone stops the muxer).
  [[nodiscard]] bool watched() const;
  // Where the picture with this pts is in the current session's video, while someone watches.
  [[nodiscard]] std::optional<LiveTime> live_time(int64_t pts_ns) const;
  // The stream has ended: every viewer's end(), and no new ones.
  void end();

 private:
  struct Entry {
    uint64_t id = 0;
    Viewer viewer;
    bool synced = false;  // it has had a keyframe: every fragment from here on
    std::shared_ptr<std::atomic<bool>> held;  // its handle is held (released: it goes at the next fragment)
  };
  void on_init(uint64_t session, std::string init);                   // the muxer's thread
  void on_fragment(uint64_t session, std::string bytes, bool keyframe);  // the muxer's thread
  std::unique_ptr<Fmp4Remuxer> start_session(const Packet& p);         // mutex held
  void end_viewers();                                                  // mutex held
  void drop_released();                                                // mutex held
  bool timeline(const Packet& p, int64_t& pts, int64_t& dts);          // mutex held

  const std::string what_;
  mutable std::mutex mutex_;
  std::vector<Entry> viewers_;
  uint64_t next_viewer_ = 0;
  uint64_t session_ = 0;                   // the current (or, without a muxer, the last) session
  std::unique_ptr<Fmp4Remuxer> remuxer_;   // while watched
  std::shared_ptr<GstCaps> caps_;          // the latest packets' (null before the first)
  bool ended_ = false;
  // The session's video, for viewers who join: the init segment, and the fragments since the last keyframe.
  std::string init_;
  std::deque<std::string> gop_;
  size_t gop_bytes_ = 0;
  // Its timeline: a picture at stream time T is at T - base + offset; the offset grows where the stream's time went
  // back (a loop) or jumped.
  int64_t base_ns_ = -1, offset_ns_ = 0, last_dts_ = -1, step_ns_ = 33'333'333;
  bool need_key_ = true;                                  // a packet was refused: the next ones wait for a keyframe
  std::deque<std::pair<int64_t, int64_t>> times_;         // (stream pts, the session's pts), the latest pictures
};

}  // namespace vc::pipeline
