#include "pipeline/sources/decoders.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {
namespace {

bool is_nvdec(GstElementFactory* f) {
  GstPlugin* plugin = gst_plugin_feature_get_plugin(GST_PLUGIN_FEATURE(f));
  const bool nv = plugin && std::strcmp(gst_plugin_get_name(plugin), "nvcodec") == 0;
  if (plugin) gst_object_unref(plugin);
  return nv;
}

bool decodes_pictures(GstElementFactory* f) {
  const char* klass = gst_element_factory_get_metadata(f, GST_ELEMENT_METADATA_KLASS);
  return klass && (std::strstr(klass, "Video") || std::strstr(klass, "Image"));
}

// Why `factory` would decode a stream of `format` wrongly ("" when it decodes it right).
std::string unfit(const std::string& factory, const StreamFormat& format) {
  if (factory.find("alphadecodebin") != std::string::npos && !format.alpha) {
    return "decodes only streams that carry an alpha channel";
  }
  if (factory == "openh264dec" && format.profile != "constrained-baseline") {
    return format.profile.empty() ? "openh264 decodes only Constrained Baseline H.264 correctly, and this stream's "
                                     "profile is not known"
                                   : fmt::format("openh264 decodes only Constrained Baseline H.264 correctly, not {}",
                                                 format.profile);
  }
  if (factory == "libde265dec" && (format.bit_depth > 8 || format.chroma != "4:2:0")) {
    return fmt::format("libde265's GStreamer element handles only 8-bit 4:2:0, not {}-bit {}", format.bit_depth,
                       format.chroma);
  }
  return "";
}

std::string caps_string(const GstStructure* s, const char* field) {
  const char* v = gst_structure_get_string(s, field);
  return v ? v : "";
}

}  // namespace

std::string StreamFormat::describe() const {
  return fmt::format("{}{}{}, {}-bit {}{}", codec, profile.empty() ? "" : " ", profile, bit_depth, chroma,
                     interlaced ? ", interlaced" : "");
}

StreamFormat stream_format(const GstCaps* caps) {
  StreamFormat f;
  if (!caps || gst_caps_get_size(caps) == 0) return f;
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  const std::string media = gst_structure_get_name(s);
  static const std::pair<const char*, const char*> names[] = {
      {"video/x-h264", "H.264"}, {"video/x-h265", "H.265"}, {"video/x-vp8", "VP8"},    {"video/x-vp9", "VP9"},
      {"video/x-av1", "AV1"},    {"image/jpeg", "JPEG"},    {"video/mpeg", "MPEG"},    {"video/x-divx", "MPEG-4"},
      {"video/x-xvid", "MPEG-4"}};
  f.codec = media;
  for (const auto& [m, name] : names) {
    if (media == m) f.codec = name;
  }
  if (media == "video/mpeg") {
    int version = 0;
    gst_structure_get_int(s, "mpegversion", &version);
    f.codec = version == 4 ? "MPEG-4" : version == 2 ? "MPEG-2" : version == 1 ? "MPEG-1" : "MPEG";
  }
  f.profile = caps_string(s, "profile");
  if (const auto chroma = caps_string(s, "chroma-format"); !chroma.empty()) f.chroma = chroma;
  guint depth = 0;
  if (gst_structure_get_uint(s, "bit-depth-luma", &depth) && depth > 0) f.bit_depth = int(depth);
  // Parsers that give no bit depth name it in the profile (VP9 2/3, the -10/-12 profiles).
  if (f.bit_depth == 8 && (f.profile.find("-10") != std::string::npos || (f.codec == "VP9" && (f.profile == "2" || f.profile == "3")))) {
    f.bit_depth = 10;
  }
  if (f.bit_depth == 8 && f.profile.find("-12") != std::string::npos) f.bit_depth = 12;
  gboolean alpha = FALSE;
  f.alpha = gst_structure_get_boolean(s, "codec-alpha", &alpha) && alpha;
  const auto interlace = caps_string(s, "interlace-mode");
  f.interlaced = !interlace.empty() && interlace != "progressive";
  return f;
}

int nvdec_device(const std::string& factory) {
  static std::mutex mutex;
  static std::map<std::string, int> known;  // the element class says it: asked once per factory
  std::lock_guard lock(mutex);
  if (const auto it = known.find(factory); it != known.end()) return it->second;
  int device = -1;
  GstElementFactory* f = gst_element_factory_find(factory.c_str());
  if (f && is_nvdec(f)) {
    // Before GStreamer 1.22 the elements do not say: their names do (nvh264dec, nvh264device1dec, …).
    const auto at = factory.find("device");
    device = at == std::string::npos ? 0 : std::atoi(factory.c_str() + at + 6);
    if (GstElement* e = gst_element_factory_create(f, nullptr)) {
      gst_object_ref_sink(e);
      if (g_object_class_find_property(G_OBJECT_GET_CLASS(e), "cuda-device-id")) {
        guint id = 0;
        g_object_get(e, "cuda-device-id", &id, nullptr);
        device = int(id);
      }
      gst_object_unref(e);
    }
  }
  if (f) gst_object_unref(f);
  known[factory] = device;
  return device;
}

DecoderChoice decoders_for(const GstCaps* caps, config::Decoder policy, int cuda_device) {
  ensure_gstreamer();
  DecoderChoice out;
  out.format = stream_format(caps);
  GList* all = gst_element_factory_list_get_elements(GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_MARGINAL);
  GList* accepting = gst_element_factory_list_filter(all, caps, GST_PAD_SINK, FALSE);
  accepting = g_list_sort(accepting, gst_plugin_feature_rank_compare_func);  // highest rank first
  for (GList* l = accepting; l; l = l->next) {
    auto* f = GST_ELEMENT_FACTORY(l->data);
    if (!decodes_pictures(f)) continue;
    const bool gpu = is_nvdec(f);
    if ((policy == config::Decoder::Gpu && !gpu) || (policy == config::Decoder::Cpu && gpu)) continue;
    if (gpu && cuda_device >= 0 && nvdec_device(GST_OBJECT_NAME(f)) != cuda_device) continue;  // another GPU's
    DecoderInfo d{GST_OBJECT_NAME(f), gpu, int(gst_plugin_feature_get_rank(GST_PLUGIN_FEATURE(f))), ""};
    d.unfit = unfit(d.factory, out.format);
    (d.unfit.empty() ? out.usable : out.rejected).push_back(std::move(d));
  }
  gst_plugin_feature_list_free(accepting);
  gst_plugin_feature_list_free(all);
  return out;
}

std::vector<ProfileDecoders> probe_decoders() {
  struct Probe {
    const char* codec;
    const char* profile;
    const char* caps;
  };
  static const Probe probes[] = {
      {"H.264", "Constrained Baseline", "video/x-h264,stream-format=byte-stream,alignment=au,profile=constrained-baseline,"
                                        "chroma-format=4:2:0,bit-depth-luma=8,bit-depth-chroma=8"},
      {"H.264", "Main / High (8-bit 4:2:0)", "video/x-h264,stream-format=byte-stream,alignment=au,profile=high,"
                                             "chroma-format=4:2:0,bit-depth-luma=8,bit-depth-chroma=8"},
      {"H.264", "High 10 (10-bit)", "video/x-h264,stream-format=byte-stream,alignment=au,profile=high-10,"
                                    "chroma-format=4:2:0,bit-depth-luma=10,bit-depth-chroma=10"},
      {"H.265", "Main (8-bit 4:2:0)", "video/x-h265,stream-format=byte-stream,alignment=au,profile=main,"
                                      "chroma-format=4:2:0,bit-depth-luma=8,bit-depth-chroma=8"},
      {"H.265", "Main 10 (10-bit 4:2:0)", "video/x-h265,stream-format=byte-stream,alignment=au,profile=main-10,"
                                          "chroma-format=4:2:0,bit-depth-luma=10,bit-depth-chroma=10"},
      {"H.265", "Main 4:4:4", "video/x-h265,stream-format=byte-stream,alignment=au,profile=main-444,"
                              "chroma-format=4:4:4,bit-depth-luma=8,bit-depth-chroma=8"},
      {"VP8", "", "video/x-vp8"},
      {"VP9", "Profile 0 (8-bit)", "video/x-vp9,profile=(string)0,chroma-format=4:2:0,bit-depth-luma=8,bit-depth-chroma=8"},
      {"VP9", "Profile 2 (10-bit)", "video/x-vp9,profile=(string)2,chroma-format=4:2:0,bit-depth-luma=10,bit-depth-chroma=10"},
      {"AV1", "Main (8/10-bit)", "video/x-av1,stream-format=obu-stream,alignment=tu"},
      {"MPEG-2", "", "video/mpeg,mpegversion=2,systemstream=false,parsed=true"},
      {"MPEG-4", "Part 2", "video/mpeg,mpegversion=4,systemstream=false,parsed=true"},
      {"JPEG", "", "image/jpeg,parsed=true"},
  };
  std::vector<ProfileDecoders> out;
  for (const auto& p : probes) {
    CapsPtr caps(gst_caps_from_string(p.caps));
    out.push_back({p.codec, p.profile, decoders_for(caps.get(), config::Decoder::Auto)});
  }
  return out;
}

namespace {

// A NAL unit's type is a picture's (a VCL NAL: a slice) in H.264 (1-5; 20: a slice of an extension) or H.265 (0-31).
bool picture_nal(bool hevc, uint8_t header) {
  if (hevc) return ((header >> 1) & 0x3f) <= 31;
  const int type = header & 0x1f;
  return (type >= 1 && type <= 5) || type == 20;
}

// The NAL units of an Annex B byte stream (start codes), or of a length-prefixed access unit (`length_size` bytes).
bool nal_picture(bool hevc, int length_size, const uint8_t* d, size_t n) {
  if (length_size == 0) {
    for (size_t i = 0; i + 3 < n; ++i) {
      if (d[i] == 0 && d[i + 1] == 0 && d[i + 2] == 1) {
        if (picture_nal(hevc, d[i + 3])) return true;
        i += 2;
      }
    }
    return false;
  }
  const auto prefix = size_t(length_size);
  for (size_t at = 0; at + prefix < n;) {
    size_t length = 0;
    for (size_t k = 0; k < prefix; ++k) length = length << 8 | d[at + k];
    if (length == 0 || length > n - at - prefix) return true;  // not what the caps say: assume a picture
    if (picture_nal(hevc, d[at + prefix])) return true;
    at += prefix + length;
  }
  return false;
}

// An MPEG-2 picture start code (00 00 01 00) or an MPEG-4 Part 2 VOP (00 00 01 B6).
bool start_code(uint8_t code, const uint8_t* d, size_t n) {
  for (size_t i = 0; i + 3 < n; ++i) {
    if (d[i] == 0 && d[i + 1] == 0 && d[i + 2] == 1 && d[i + 3] == code) return true;
  }
  return false;
}

}  // namespace

int nal_length_size(const GstCaps* caps) {
  const GstStructure* s = caps && gst_caps_get_size(caps) > 0 ? gst_caps_get_structure(caps, 0) : nullptr;
  const char* format = s ? gst_structure_get_string(s, "stream-format") : nullptr;
  if (!format || std::string(format) == "byte-stream") return 0;
  const bool hevc = std::string(gst_structure_get_name(s)) == "video/x-h265";
  const GValue* data = gst_structure_get_value(s, "codec_data");
  GstBuffer* buffer = data && G_VALUE_HOLDS(data, GST_TYPE_BUFFER) ? gst_value_get_buffer(data) : nullptr;
  int size = 4;
  GstMapInfo map;
  if (buffer && gst_buffer_map(buffer, &map, GST_MAP_READ)) {
    const size_t at = hevc ? 21 : 4;  // lengthSizeMinusOne: avcC byte 4, hvcC byte 21 (low two bits)
    if (map.size > at) size = (map.data[at] & 0x3) + 1;
    gst_buffer_unmap(buffer, &map);
  }
  return size;
}

bool carries_picture(const std::string& codec, int length_size, const uint8_t* data, size_t size) {
  if (size == 0) return false;
  if (codec == "H.264" || codec == "H.265") return nal_picture(codec == "H.265", length_size, data, size);
  if (codec == "MPEG-2") return start_code(0x00, data, size);
  if (codec == "MPEG-4") return start_code(0xb6, data, size);
  return true;
}

namespace {

// Whether a compressed picture is one the decoder gives back: its time within the pad's segment (or unknown).
bool in_segment(GstPad* pad, GstBuffer* buffer) {
  if (!GST_BUFFER_PTS_IS_VALID(buffer)) return true;
  GstEvent* event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0);
  if (!event) return true;
  const GstSegment* segment = nullptr;
  gst_event_parse_segment(event, &segment);
  bool inside = true;
  if (segment && segment->format == GST_FORMAT_TIME) {
    const GstClockTime pts = GST_BUFFER_PTS(buffer);
    const GstClockTime end = GST_BUFFER_DURATION_IS_VALID(buffer) ? pts + GST_BUFFER_DURATION(buffer) : GST_CLOCK_TIME_NONE;
    guint64 start = 0, stop = 0;
    inside = gst_segment_clip(segment, GST_FORMAT_TIME, pts, end, &start, &stop);
  }
  gst_event_unref(event);
  return inside;
}

}  // namespace

bool owes_picture(GstPad* pad, GstBuffer* buffer, const std::string& codec) {
  if (!in_segment(pad, buffer)) return false;
  if (!GST_BUFFER_FLAG_IS_SET(buffer, GST_BUFFER_FLAG_HEADER)) return true;
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_READ)) return true;
  GstCaps* caps = gst_pad_get_current_caps(pad);
  const bool picture = carries_picture(codec, nal_length_size(caps), map.data, map.size);
  if (caps) gst_caps_unref(caps);
  gst_buffer_unmap(buffer, &map);
  return picture;
}

}  // namespace vc::pipeline
