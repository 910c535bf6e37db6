#include "pipeline/live/fmp4_remuxer.hpp"

#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::pipeline {
namespace {

constexpr guint64 kMaxQueuedBytes = guint64(4) << 20;  // packets waiting for the muxer (over a second of 4K H.265)

}  // namespace

Fmp4Remuxer::Fmp4Remuxer(const std::shared_ptr<GstCaps>& caps, Output out, std::string what)
    : what_(std::move(what)), out_(std::move(out)) {
  const char* parser = mp4_parser(caps.get());
  if (!parser) {
    throw DataError(fmt::format("{}: {} video cannot be remuxed to MP4 (only H.264 and H.265)", what_, media_type(caps.get())));
  }
  // appsrc (the stream's own caps) -> parser (the muxer's stream format) -> mp4mux, a fragment per picture -> appsink.
  pipeline_ = make_pipeline(nullptr);
  GstElement* p = pipeline_.get();
  src_ = add_element(p, "appsrc", "livesrc");  // (its thread: "livesrc:src", the muxer's "livemux:src")
  g_object_set(src_, "caps", caps.get(), "format", GST_FORMAT_TIME, "block", FALSE, "max-bytes", kMaxQueuedBytes, nullptr);
  GstElement* parse = add_element(p, parser);
  GstElement* mux = add_element(p, "mp4mux", "livemux");
  // A fragment as soon as a picture is in (1 ms: every picture ends one), written as it goes, never rewritten.
  g_object_set(mux, "fragment-duration", 1u, "streamable", TRUE, nullptr);
  GstElement* sink = add_element(p, "appsink", "liveout");
  g_object_set(sink, "sync", FALSE, "enable-last-sample", FALSE, nullptr);
  GstAppSinkCallbacks callbacks{};
  callbacks.new_sample = [](GstAppSink* s, gpointer self) {
    SamplePtr sample{gst_app_sink_pull_sample(s)};
    if (!sample) return GST_FLOW_EOS;
    auto* remuxer = static_cast<Fmp4Remuxer*>(self);
    try {
      remuxer->take(gst_sample_get_buffer(sample.get()));
    } catch (const std::exception& e) {
      std::lock_guard lock(remuxer->error_mutex_);
      if (!remuxer->error_) remuxer->error_ = fmt::format("{}: {}", remuxer->what_, e.what());
      return GST_FLOW_ERROR;
    }
    return GST_FLOW_OK;
  };
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, this, nullptr);
  link_chain({src_, parse, mux, sink});
  bus_ = gst_element_get_bus(p);
  if (gst_element_set_state(p, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    std::string why = "it did not start";
    if (MessagePtr m{gst_bus_pop_filtered(bus_, GST_MESSAGE_ERROR)}) why = describe_error(m.get());
    gst_object_unref(bus_);
    throw UnavailableError(fmt::format("{}: cannot start the MP4 muxer: {}", what_, why));
  }
}

Fmp4Remuxer::~Fmp4Remuxer() {
  pipeline_.reset();  // stopped: the muxer's thread is gone before the members it uses
  if (bus_) gst_object_unref(bus_);
}

std::optional<std::string> Fmp4Remuxer::error() {
  std::lock_guard lock(error_mutex_);
  if (!error_) {
    if (MessagePtr m{gst_bus_pop_filtered(bus_, GST_MESSAGE_ERROR)}) error_ = fmt::format("{}: {}", what_, describe_error(m.get()));
  }
  return error_;
}

bool Fmp4Remuxer::push(const Packet& packet, int64_t pts_ns, int64_t dts_ns) {
  if (error()) return false;
  if (gst_app_src_get_current_level_bytes(GST_APP_SRC(src_)) >= kMaxQueuedBytes) return false;
  GstBuffer* out = gst_buffer_copy(packet.buffer.get());  // shares the memory: the packet's own bytes
  GST_BUFFER_PTS(out) = pts_ns >= 0 ? GstClockTime(pts_ns) : GST_CLOCK_TIME_NONE;
  GST_BUFFER_DTS(out) = dts_ns >= 0 ? GstClockTime(dts_ns) : GST_CLOCK_TIME_NONE;
  GST_BUFFER_FLAG_UNSET(out, GST_BUFFER_FLAG_DISCONT);
  return gst_app_src_push_buffer(GST_APP_SRC(src_), out) == GST_FLOW_OK;
}

// The muxer's bytes, box by box: ftyp and moov make the init segment, each moof and its mdat a fragment.
void Fmp4Remuxer::take(GstBuffer* buffer) {
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) throw InternalError("cannot read the muxer's output");
  reader_.append(std::string_view(reinterpret_cast<const char*>(map.data), map.size));
  gst_buffer_unmap(buffer, &map);
  while (auto box = reader_.next()) {
    if (box->type == "ftyp") {
      init_ = std::move(box->bytes);
    } else if (box->type == "moov" && !init_sent_) {
      trex_flags_ = trex_default_sample_flags(box->bytes);
      init_ += box->bytes;
      init_sent_ = true;
      out_.init(std::move(init_));
    } else if (box->type == "moof") {
      moof_ = std::move(box->bytes);
    } else if (box->type == "mdat" && !moof_.empty() && init_sent_) {
      const bool key = fragment_starts_with_keyframe(moof_, trex_flags_);
      moof_ += box->bytes;
      out_.fragment(std::move(moof_), key);
      moof_.clear();
    }  // anything else (mfra at the end, free space) is not for a live viewer
  }
}

}  // namespace vc::pipeline
