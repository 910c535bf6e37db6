#include "pipeline/sources/decoders.hpp"

#include <cstring>

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

}  // namespace

std::vector<DecoderInfo> decoders_for(const GstCaps* caps, config::Decoder policy) {
  ensure_gstreamer();
  GList* all = gst_element_factory_list_get_elements(GST_ELEMENT_FACTORY_TYPE_DECODER, GST_RANK_MARGINAL);
  GList* usable = gst_element_factory_list_filter(all, caps, GST_PAD_SINK, FALSE);
  usable = g_list_sort(usable, gst_plugin_feature_rank_compare_func);  // highest rank first
  std::vector<DecoderInfo> out;
  for (GList* l = usable; l; l = l->next) {
    auto* f = GST_ELEMENT_FACTORY(l->data);
    if (!decodes_pictures(f)) continue;
    const bool gpu = is_nvdec(f);
    if ((policy == config::Decoder::Gpu && !gpu) || (policy == config::Decoder::Cpu && gpu)) continue;
    out.push_back({GST_OBJECT_NAME(f), gpu, int(gst_plugin_feature_get_rank(GST_PLUGIN_FEATURE(f)))});
  }
  gst_plugin_feature_list_free(usable);
  gst_plugin_feature_list_free(all);
  return out;
}

std::vector<CodecDecoders> probe_decoders() {
  const std::pair<const char*, const char*> codecs[] = {
      {"H.264", "video/x-h264,stream-format=byte-stream,alignment=au"},
      {"H.265", "video/x-h265,stream-format=byte-stream,alignment=au"},
      {"VP9", "video/x-vp9"},
      {"AV1", "video/x-av1"},
      {"JPEG", "image/jpeg,parsed=true"},
  };
  std::vector<CodecDecoders> out;
  for (const auto& [name, caps_text] : codecs) {
    CapsPtr caps(gst_caps_from_string(caps_text));
    out.push_back({name, decoders_for(caps.get(), config::Decoder::Auto)});
  }
  return out;
}

}  // namespace vc::pipeline
