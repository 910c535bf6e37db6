// Which decoder decodes a stream: the installed GStreamer decoders that accept its caps, best rank first, kept or
// left out by input.decoder (gpu: NVDEC only; cpu: never NVDEC; auto: all, NVDEC first where ranked first).
#pragma once
#include <gst/gst.h>

#include <string>
#include <vector>

#include "config/config.hpp"

namespace vc::pipeline {

struct DecoderInfo {
  std::string factory;  // "nvh264dec", "avdec_h264", "jpegdec", …
  bool gpu = false;     // NVDEC (the nvcodec plugin): it can hand frames over in GPU memory
  int rank = 0;
};

// The decoders for `caps` (a parsed compressed stream), in the order they should be tried.
std::vector<DecoderInfo> decoders_for(const GstCaps* caps, config::Decoder policy);

// For `doctor`: the usable decoders of the common codecs ("H.264" -> "nvh264dec (NVDEC), avdec_h264, …").
struct CodecDecoders {
  std::string codec;
  std::vector<DecoderInfo> decoders;
};
std::vector<CodecDecoders> probe_decoders();

}  // namespace vc::pipeline
