// Which decoder decodes a stream — chosen by what the stream is, not by rank alone. The parsed caps say the codec,
// profile, bit depth and chroma format; the installed decoders that accept them are ranked (input.decoder: gpu =
// NVDEC only, cpu = never NVDEC, auto = all), and those known to decode such a stream wrongly are left out:
// openh264dec for anything but Constrained Baseline H.264 (it is not a conforming High-profile decoder), libde265dec
// for more than 8 bits or other than 4:2:0 (it corrupts memory on 10-bit). A stream that no decoder here can decode
// correctly is refused with what it is.
#pragma once
#include <gst/gst.h>

#include <cstdint>
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

// How H.264/H.265 NAL units are framed in `caps` (the parser's output): 0 for start codes (byte-stream), else the size
// of each unit's length prefix (avc/avc3/hvc1/hev1, from codec_data; 4 when it does not say).
int nal_length_size(const GstCaps* caps);
// Whether a compressed buffer of `codec` ("H.264", "H.265", "MPEG-2", "MPEG-4", "JPEG") holds a coded picture, not
// only stream headers (SPS/PPS, sequence headers): what the decoder's input is counted by, against the pictures it
// gives back. A keyframe that carries its headers (x264 repeats them at each one) holds a picture. `length_size`:
// nal_length_size() of its caps. When the data cannot be read as such (an unknown codec, lengths that do not add up)
// it is taken to hold one.
bool carries_picture(const std::string& codec, int length_size, const uint8_t* data, size_t size);
// Whether a buffer arriving at a decoder's sink `pad` owes a picture back: it holds one (carries_picture: a keyframe
// that carries its headers, which the parser flags HEADER, included) and its time is within the pad's segment (the
// pictures before an MP4 edit list's start are decoded for what follows, and rightly given nothing back for).
bool owes_picture(GstPad* pad, GstBuffer* buffer, const std::string& codec);

// For `doctor`: per codec and profile, the decoders that would be used and those refused.
struct ProfileDecoders {
  std::string codec, profile;  // "H.264", "High (8-bit 4:2:0)"
  DecoderChoice choice;
};
std::vector<ProfileDecoders> probe_decoders();

}  // namespace vc::pipeline
