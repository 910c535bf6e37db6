// Media for the event tests: a video in which a pattern appears at known times, a classifier that sees it, and
// readers that take a file apart — its compressed packets (as the container holds them) and a decoded frame.
#pragma once
#include <gst/app/gstappsink.h>

#include <string>
#include <vector>

#include "pipeline/fake_classifier.hpp"
#include "pipeline/sources/gst_util.hpp"
#include "pipeline/sources/packets.hpp"
#include "pipeline_helpers.hpp"

namespace vc::test {

// 20 s at 25 fps, H.264 with B-frames and a keyframe at least every second: black, with a white picture (a black
// ball moving on it) at [4 s, 7 s) and [13 s, 16 s). Frame 130 (5.2 s) of the first appearance has a grey ball:
// the frame a classifier is surest of (event_logits), the peak a snapshot must show.
inline std::string event_video() {
  const auto file = path("event-source.mp4");
  if (fs::exists(file)) return file;
  const std::string caps = " ! video/x-raw,width=320,height=240,framerate=25/1,format=I420 ! c. ";
  // The pieces, each stamped where it goes (concat then keeps the timestamps as they are).
  std::string pieces;
  int64_t at = 0;
  for (const auto& [pattern, frames] : std::vector<std::pair<std::string, int>>{
           {"pattern=black", 100}, {"pattern=ball background-color=0xffffffff foreground-color=0xff000000", 30},
           {"pattern=ball background-color=0xffffffff foreground-color=0xff404040", 1},
           {"pattern=ball background-color=0xffffffff foreground-color=0xff000000", 44}, {"pattern=black", 150},
           {"pattern=ball background-color=0xffffffff foreground-color=0xff000000", 75}, {"pattern=black", 100}}) {
    pieces += " videotestsrc " + pattern + " num-buffers=" + std::to_string(frames) + " timestamp-offset=" +
              std::to_string(at * 40'000'000) + caps;
    at += frames;
  }
  const auto r = run_command("gst-launch-1.0 -q concat name=c adjust-base=false ! videoconvert ! x264enc key-int-max=25 "
                             "bframes=2 ! h264parse ! mp4mux ! filesink location='" + file + ".part'" + pieces);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  fs::rename(file + ".part", file);
  return file;
}

// The luma of a host frame (I420, NV12; packed RGB/BGR averaged), row by row.
inline std::vector<uint8_t> luma(const inference::FrameView& v) {
  using inference::PixelFormat;
  std::vector<uint8_t> y(size_t(v.width) * size_t(v.height));
  const bool planar = v.format == PixelFormat::I420 || v.format == PixelFormat::NV12;
  const int bpp = v.format == PixelFormat::BGRx || v.format == PixelFormat::RGBA ? 4 : 3;
  for (int r = 0; r < v.height; ++r) {
    const uint8_t* row = v.planes[0] + size_t(r) * size_t(v.strides[0]);
    for (int c = 0; c < v.width; ++c) {
      y[size_t(r) * size_t(v.width) + size_t(c)] =
          planar ? row[c] : uint8_t((row[c * bpp] + row[c * bpp + 1] + row[c * bpp + 2]) / 3);
    }
  }
  return y;
}

// What the test's classifier sees: on a white picture, class 1 — surer (logit 7 against 5) when its ball is grey
// rather than black; otherwise class 0.
inline std::vector<float> event_logits(const inference::FrameView& v) {
  const auto y = luma(v);
  int64_t sum = 0, grey = 0, black = 0;
  for (uint8_t p : y) {
    sum += p;
    grey += p > 50 && p < 110;
    black += p < 35;
  }
  std::vector<float> logits(10, 0.f);
  if (sum / int64_t(y.size()) > 128) {
    logits[1] = grey > black ? 7.f : 5.f;
  } else {
    logits[0] = 5.f;
  }
  return logits;
}

// The first frame the app's own source decodes from `file` (a video or an image): its luma and size.
inline std::vector<uint8_t> first_frame_luma(const std::string& file, config::InputKind kind, int& width, int& height) {
  auto hub = std::make_shared<pipeline::FrameHub>(std::vector<pipeline::QueuePolicy>{{4, false}});
  auto stop = std::make_shared<std::atomic<bool>>(false);
  config::Input in;
  in.kind = kind;
  in.path = file;
  in.name = "first";
  pipeline::Stream s(0, in, false, {hub, nullptr, nullptr, stop, nullptr, nullptr});
  s.start();
  std::vector<uint8_t> y;
  for (;;) {
    auto batch = hub->pop_batch(4, std::chrono::microseconds(0));
    if (!batch.empty() && y.empty()) {
      width = batch.front().view.width;
      height = batch.front().view.height;
      y = luma(batch.front().view);
    }
    if (batch.empty() && hub->all_done()) break;
  }
  s.join();
  return y;
}

// A file's compressed video packets as a player gets them, in decode order (a picture outside the file's duration
// is not: a sink drops it).
inline std::vector<pipeline::Packet> packets_of(const std::string& file) {
  gst_init(nullptr, nullptr);
  GError* error = nullptr;
  pipeline::PipelinePtr p(gst_parse_launch(("filesrc location=\"" + file + "\" ! parsebin ! appsink name=sink sync=false").c_str(), &error));
  REQUIRE_MESSAGE(error == nullptr, (error ? error->message : ""));
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p.get()), "sink");
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  std::vector<pipeline::Packet> out;
  while (GstSample* sample = gst_app_sink_pull_sample(GST_APP_SINK(sink))) {
    auto caps = std::shared_ptr<GstCaps>(gst_caps_ref(gst_sample_get_caps(sample)), [](GstCaps* c) { gst_caps_unref(c); });
    out.push_back(pipeline::make_packet(gst_sample_get_buffer(sample), caps));
    gst_sample_unref(sample);
  }
  gst_element_set_state(p.get(), GST_STATE_NULL);
  gst_object_unref(sink);
  return out;
}

// The coded pictures in an H.264 packet (length-prefixed NAL units, 4-byte lengths): its slices, byte for byte —
// what must be the source's own (parameter sets may move in or out of the stream when it is remuxed).
inline std::string slices_of(const pipeline::Packet& p) {
  GstMapInfo map;
  REQUIRE(gst_buffer_map(p.buffer.get(), &map, GST_MAP_READ));
  std::string slices;
  for (size_t at = 0; at + 4 <= map.size;) {
    const size_t n = size_t(map.data[at]) << 24 | size_t(map.data[at + 1]) << 16 | size_t(map.data[at + 2]) << 8 | map.data[at + 3];
    if (at + 4 + n > map.size || n == 0) break;
    const int type = map.data[at + 4] & 0x1f;
    if (type >= 1 && type <= 5) slices.append(reinterpret_cast<const char*>(map.data + at), n + 4);
    at += 4 + n;
  }
  gst_buffer_unmap(p.buffer.get(), &map);
  return slices;
}

}  // namespace vc::test
