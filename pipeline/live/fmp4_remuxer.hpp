// A stream's H.264/H.265 packets remuxed into fragmented MP4 as they come, one fragment per picture, for the live view
// (live_feed.hpp): appsrc -> h264parse/h265parse -> mp4mux -> appsink, never decoded or encoded. The muxer runs on
// GStreamer's thread; push() never blocks (a full queue refuses the packet).
#pragma once
#include <gst/gst.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pipeline/live/mp4_boxes.hpp"
#include "pipeline/sources/gst_util.hpp"
#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

class Fmp4Remuxer {
 public:
  // What comes out, on the muxer's thread (must not block): the init segment (ftyp + moov) once, then each fragment
  // (moof + mdat) and whether it starts with a keyframe.
  struct Output {
    std::function<void(std::string)> init;
    std::function<void(std::string, bool keyframe)> fragment;
  };
  // Starts the muxer for packets of `caps` (those mp4_parser() has a parser for: gst_util.hpp). Throws vc::DataError when they cannot be remuxed, vc::UnavailableError
  // when GStreamer's elements are missing or do not start. `what` names it in errors.
  Fmp4Remuxer(const std::shared_ptr<GstCaps>& caps, Output out, std::string what);
  ~Fmp4Remuxer();
  Fmp4Remuxer(const Fmp4Remuxer&) = delete;
  Fmp4Remuxer& operator=(const Fmp4Remuxer&) = delete;

  // The packet's picture at these times (the muxer's timeline, from 0, decode times increasing). False when the
  // muxer's queue is full (the packet is not taken) or the muxer failed (error() says why).
  bool push(const Packet& packet, int64_t pts_ns, int64_t dts_ns);
  // Why the muxer stopped, once it did.
  [[nodiscard]] std::optional<std::string> error();

 private:
  void take(GstBuffer* buffer);  // the muxer's thread

  std::string what_;
  Output out_;
  GstElement* src_ = nullptr;
  GstBus* bus_ = nullptr;
  std::mutex error_mutex_;
  std::optional<std::string> error_;  // the muxer's own failure (its thread), or the bus's
  Mp4BoxReader reader_;        // the muxer's thread
  std::string moof_;           // a fragment's moof, waiting for its mdat
  std::string init_;           // ftyp, until the moov
  uint32_t trex_flags_ = 0;
  bool init_sent_ = false;
  // Last: destroyed (stopped) first, also when the constructor throws — its threads use every member above.
  PipelinePtr pipeline_;
};

}  // namespace vc::pipeline
