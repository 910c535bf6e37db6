// A stream's compressed video as it reaches the decoder — one access unit per packet, the source's own bytes — for
// whoever keeps it (event clips: pipeline/events/). A packet holds a reference to GStreamer's buffer: no copy.
#pragma once
#include <gst/gst.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace vc::pipeline {

struct Packet {
  std::shared_ptr<GstBuffer> buffer;  // the access unit (a reference, released with the last holder)
  std::shared_ptr<GstCaps> caps;      // what it is: codec, stream format, codec data
  int64_t pts_ns = -1, dts_ns = -1;   // on the stream's timeline, as its frames' pts
  bool keyframe = false;              // decodable on its own: a clip may start here
  size_t bytes = 0;
};

// Called on a source's streaming thread for each packet: must not block.
using PacketSink = std::function<void(const Packet&)>;

// A packet holding its own reference to `buffer`.
Packet make_packet(GstBuffer* buffer, const std::shared_ptr<GstCaps>& caps);

}  // namespace vc::pipeline
