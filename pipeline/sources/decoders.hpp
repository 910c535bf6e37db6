// Which decoder decodes a stream — chosen by what the stream is, not by rank alone. The parsed caps say the codec,
// profile, bit depth and chroma format; the installed decoders that accept them are ranked (input.decoder: gpu =
// NVDEC only, cpu = never NVDEC, auto = all), and those known to decode such a stream wrongly are left out:
// openh264dec for anything but Constrained Baseline H.264 (it is not a conforming High-profile decoder), libde265dec
// for more than 8 bits or other than 4:2:0 (it corrupts memory on 10-bit). A stream that no decoder here can decode
// correctly is refused with what it is.
#pragma once
#include <gst/gst.h>

#include <string>
#include <vector>

#include "config/config.hpp"

namespace vc::pipeline {

// What a compressed video stream is, from its parsed caps.
struct StreamFormat {
  std::string codec;          // "H.264", "H.265", "VP9", … or the media type when not a known codec
  std::string profile;        // as the parser names it ("high", "main-10", "0"); "" when it does not say
  int bit_depth = 8;          // luma bits per sample
  std::string chroma = "4:2:0";
  bool interlaced = false;
  bool alpha = false;         // VP8/VP9 with an alpha channel (codec-alpha)
  // "H.265 main-10, 10-bit 4:2:0"
  [[nodiscard]] std::string describe() const;
};
StreamFormat stream_format(const GstCaps* caps);

struct DecoderInfo {
  std::string factory;  // "nvh264dec", "avdec_h264", "jpegdec", …
  bool gpu = false;     // NVDEC (the nvcodec plugin): it can hand frames over in GPU memory
  int rank = 0;
  std::string unfit;    // why it would decode this stream wrongly ("" when it decodes it right)
};

struct DecoderChoice {
  StreamFormat format;
  std::vector<DecoderInfo> usable;    // in the order they should be tried
  std::vector<DecoderInfo> rejected;  // accept the caps but decode such a stream wrongly (unfit says why)
};
// The decoders for `caps` (a parsed compressed stream). `cuda_device` >= 0: of the NVDEC decoders (one element per
// GPU: nvh264dec, nvh264device1dec, …) only that GPU's.
DecoderChoice decoders_for(const GstCaps* caps, config::Decoder policy, int cuda_device = -1);
// The GPU an NVDEC decoder element decodes on (its cuda-device-id); -1 for any other decoder.
int nvdec_device(const std::string& factory);

// For `doctor`: per codec and profile, the decoders that would be used and those refused.
struct ProfileDecoders {
  std::string codec, profile;  // "H.264", "High (8-bit 4:2:0)"
  DecoderChoice choice;
};
std::vector<ProfileDecoders> probe_decoders();

}  // namespace vc::pipeline
