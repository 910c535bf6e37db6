#include "pipeline/sources/packets.hpp"

#include <gst/app/gstappsink.h>
#include <gst/video/video.h>

#include <algorithm>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "pipeline/sources/gst_source.hpp"

namespace vc::pipeline {

Packet make_packet(GstBuffer* buffer, const std::shared_ptr<GstCaps>& caps) {
  Packet p;
  p.buffer = std::shared_ptr<GstBuffer>(gst_buffer_ref(buffer), [](GstBuffer* b) { gst_buffer_unref(b); });
  p.caps = caps;
  p.pts_ns = GST_BUFFER_PTS_IS_VALID(buffer) ? int64_t(GST_BUFFER_PTS(buffer)) : -1;
  p.dts_ns = GST_BUFFER_DTS_IS_VALID(buffer) ? int64_t(GST_BUFFER_DTS(buffer)) : p.pts_ns;
  p.keyframe = !GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_DELTA_UNIT);
  p.bytes = gst_buffer_get_size(buffer);
  return p;
}

// The caps of the packets on `pad` (streaming thread), shared until they change.
std::shared_ptr<GstCaps> GstSource::packet_caps(GstPad* pad) {
  GstCaps* now = gst_pad_get_current_caps(pad);
  if (!now) return packet_caps_;
  if (!packet_caps_ || !gst_caps_is_equal(now, packet_caps_.get())) {
    packet_caps_ = std::shared_ptr<GstCaps>(gst_caps_ref(now), [](GstCaps* c) { gst_caps_unref(c); });
  }
  gst_caps_unref(now);
  return packet_caps_;
}

GstElement* GstSource::add_packet_branch(GstElement* tee) {
  GstElement* p = pipeline_.get();
  GstElement* queue = add_element(p, "queue");
  // Never holds the frames back: behind by a second, it drops (the clip then misses them; the classifier does not).
  g_object_set(queue, "leaky", 2 /* downstream */, "max-size-buffers", 30u, "max-size-time", guint64(0),
               "max-size-bytes", 0u, nullptr);
  GstElement* encoder = add_element(p, "x264enc");
  const int gop = std::max(1, int(fps_ > 0 ? fps_.load() : 30.0));
  g_object_set(encoder, "key-int-max", guint(gop), "bitrate", 3000u, nullptr);
  gst_util_set_object_arg(G_OBJECT(encoder), "speed-preset", "ultrafast");
  gst_util_set_object_arg(G_OBJECT(encoder), "tune", "zerolatency");
  GstElement* sink = add_element(p, "appsink");
  // (not async: while nobody watches it gets no picture, and the pipeline must not wait for one to start)
  g_object_set(sink, "sync", FALSE, "async", FALSE, "max-buffers", 64u, "drop", TRUE, "enable-last-sample", FALSE, nullptr);
  GstAppSinkCallbacks callbacks{};
  callbacks.new_sample = [](GstAppSink* s, gpointer self) {
    auto* source = static_cast<GstSource*>(self);
    SamplePtr sample{gst_app_sink_pull_sample(s)};
    if (!sample) return GST_FLOW_EOS;
    GstCaps* caps = gst_sample_get_caps(sample.get());
    if (!source->packet_caps_ || (caps && !gst_caps_is_equal(caps, source->packet_caps_.get()))) {
      source->packet_caps_ = std::shared_ptr<GstCaps>(gst_caps_ref(caps), [](GstCaps* c) { gst_caps_unref(c); });
    }
    Packet packet = make_packet(gst_sample_get_buffer(sample.get()), source->packet_caps_);
    if (packet.pts_ns >= 0) {
      std::lock_guard lock(source->encoder_mutex_);
      if (!source->encoder_shift_ && GST_CLOCK_TIME_IS_VALID(source->encoder_first_)) {
        source->encoder_shift_ = packet.pts_ns - int64_t(source->encoder_first_);  // (the first packet: the first picture)
      }
      if (source->encoder_shift_) packet.pts_ns = packet.dts_ns = packet.pts_ns - *source->encoder_shift_;  // (no B-frames)
    }
    source->spec_.on_packet(packet);
    return GST_FLOW_OK;
  };
  gst_app_sink_set_callbacks(GST_APP_SINK(sink), &callbacks, this, nullptr);
  // Encoded only while wanted (a live viewer watches; event clips always want it): pictures stop before the encoder
  // otherwise, and when they start again the encoder is asked for a keyframe, so that a viewer sees one at once.
  // The first picture's time after each start is kept for the packets (encoder_shift_).
  PadPtr out(gst_element_get_static_pad(queue, "src"));
  gst_pad_add_probe(out.get(), GST_PAD_PROBE_TYPE_BUFFER, [](GstPad* pad, GstPadProbeInfo* info, gpointer self) {
    auto* source = static_cast<GstSource*>(self);
    const bool wanted = !source->spec_.packets_wanted || source->spec_.packets_wanted();
    if (wanted && !source->encoding_ && source->spec_.packets_wanted) {
      gst_pad_push_event(pad, gst_video_event_new_downstream_force_key_unit(GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE,
                                                                            GST_CLOCK_TIME_NONE, TRUE, 0));
    }
    if (wanted && !source->encoding_) {  // (re)started: its first picture's time, to learn the encoder's shift from
      std::lock_guard lock(source->encoder_mutex_);
      source->encoder_first_ = GST_BUFFER_PTS(GST_PAD_PROBE_INFO_BUFFER(info));
      source->encoder_shift_.reset();
    }
    source->encoding_ = wanted;
    return wanted ? GST_PAD_PROBE_OK : GST_PAD_PROBE_DROP;
  }, this, nullptr);
  GstElement* parse = add_element(p, "h264parse");
  link_chain({queue, add_element(p, "videoconvert"),
              add_capsfilter(p, gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "I420", nullptr)), encoder,
              parse, add_capsfilter(p, gst_caps_from_string("video/x-h264, stream-format=(string)avc, alignment=(string)au")),
              sink});
  if (!gst_element_link(tee, queue)) throw InternalError(fmt::format("{}: could not branch the clip encoder", what_));
  for (GstElement* e : {queue, encoder, parse, sink}) gst_element_sync_state_with_parent(e);
  return sink;
}

}  // namespace vc::pipeline
