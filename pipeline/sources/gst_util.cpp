#include "pipeline/sources/gst_util.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "pipeline/sources/gst_probe.hpp"

namespace vc::pipeline {
namespace {

// Which Debian package provides an element, for the error message.
const char* package_of(const std::string& factory) {
  if (factory.rfind("x264", 0) == 0) return "gstreamer1.0-plugins-ugly";
  if (factory.rfind("avdec", 0) == 0) return "gstreamer1.0-libav";
  if (factory.rfind("nv", 0) == 0 || factory.rfind("openh264", 0) == 0 || factory == "h264parse" ||
      factory == "h265parse" || factory == "waylandsink") {
    return "gstreamer1.0-plugins-bad";
  }
  if (factory == "ximagesink" || factory == "xvimagesink") return "gstreamer1.0-x";
  if (factory == "glimagesink") return "gstreamer1.0-gl";
  if (factory == "mp4mux" || factory == "matroskamux" || factory == "jpegdec" || factory == "pngdec" ||
      factory == "jpegenc" || factory == "pngenc" || factory == "rtspsrc" || factory == "v4l2src" || factory == "qtdemux") {
    return "gstreamer1.0-plugins-good";
  }
  return "gstreamer1.0-plugins-base";
}

}  // namespace

PipelinePtr make_pipeline(const char* name) {
  ensure_gstreamer();
  GstElement* p = gst_pipeline_new(name);
  if (!p) throw InternalError("GStreamer could not create a pipeline");
  return PipelinePtr(p);
}

GstElement* add_element(GstElement* bin, const char* factory, const char* name) {
  ensure_gstreamer();
  GstElement* e = gst_element_factory_make(factory, name);
  if (!e) {
    throw UnavailableError(fmt::format("GStreamer element '{}' is missing: install {} (see `video-classifier doctor`)",
                                       factory, package_of(factory)));
  }
  if (!gst_bin_add(GST_BIN(bin), e)) {
    gst_object_unref(e);
    throw InternalError(fmt::format("could not add '{}' to its pipeline", factory));
  }
  return e;
}

void link_chain(std::initializer_list<GstElement*> elements) {
  GstElement* previous = nullptr;
  for (GstElement* e : elements) {
    if (previous && !gst_element_link(previous, e)) {
      throw InternalError(fmt::format("GStreamer could not link {} to {}", GST_OBJECT_NAME(previous), GST_OBJECT_NAME(e)));
    }
    previous = e;
  }
}

GstElement* add_capsfilter(GstElement* bin, GstCaps* caps, const char* name) {
  GstElement* f = add_element(bin, "capsfilter", name);
  g_object_set(f, "caps", caps, nullptr);
  gst_caps_unref(caps);
  return f;
}

std::string describe_error(GstMessage* m) {
  GError* error = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(m, &error, &debug);
  const std::string text = fmt::format("element '{}': {}", GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), error ? error->message : "?");
  // GStreamer's own detail (source file, function, element path) helps a developer, not a user: debug level only.
  if (debug && *debug) vc::log::get("gstreamer")->debug("{} ({})", text, debug);
  if (error) g_error_free(error);
  g_free(debug);
  return text;
}

void stop_pipeline(GstElement* pipeline) noexcept {
  if (!pipeline) return;
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_element_get_state(pipeline, nullptr, nullptr, 5 * GST_SECOND);
}

std::optional<inference::PixelFormat> pixel_format(GstVideoFormat f) {
  using inference::PixelFormat;
  switch (f) {
    case GST_VIDEO_FORMAT_NV12: return PixelFormat::NV12;
    case GST_VIDEO_FORMAT_I420: return PixelFormat::I420;
    case GST_VIDEO_FORMAT_P010_10LE: return PixelFormat::P010;
    case GST_VIDEO_FORMAT_I420_10LE: return PixelFormat::I420_10;
    case GST_VIDEO_FORMAT_BGR: return PixelFormat::BGR;
    case GST_VIDEO_FORMAT_RGB: return PixelFormat::RGB;
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_BGRA: return PixelFormat::BGRx;
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_RGBA: return PixelFormat::RGBA;
    default: return std::nullopt;
  }
}

bool streaming_stopped(GstElement* pipeline) {
  bool any = false, running = false;
  GstIterator* elements = gst_bin_iterate_recurse(GST_BIN(pipeline));
  GValue e = G_VALUE_INIT;
  GstIteratorResult next;
  while ((next = gst_iterator_next(elements, &e)) == GST_ITERATOR_OK) {
    GstIterator* pads = gst_element_iterate_pads(GST_ELEMENT(g_value_get_object(&e)));
    GValue p = G_VALUE_INIT;
    while (gst_iterator_next(pads, &p) == GST_ITERATOR_OK) {
      GstPad* pad = GST_PAD(g_value_get_object(&p));
      GST_OBJECT_LOCK(pad);
      if (GstTask* task = GST_PAD_TASK(pad)) {
        any = true;
        running = running || gst_task_get_state(task) == GST_TASK_STARTED;
      }
      GST_OBJECT_UNLOCK(pad);
      g_value_reset(&p);
    }
    g_value_unset(&p);
    gst_iterator_free(pads);
    g_value_reset(&e);
  }
  g_value_unset(&e);
  gst_iterator_free(elements);
  return next == GST_ITERATOR_DONE && any && !running;  // (a pipeline changing as it was read: not stopped)
}

std::string media_type(const GstCaps* caps) {
  return caps && gst_caps_get_size(caps) > 0 ? gst_structure_get_name(gst_caps_get_structure(caps, 0)) : "";
}

const char* mp4_parser(const GstCaps* caps) {
  const auto media = media_type(caps);
  return media == "video/x-h264" ? "h264parse" : media == "video/x-h265" ? "h265parse" : nullptr;
}

bool has_element(const char* factory) {
  ensure_gstreamer();
  GstElementFactory* f = gst_element_factory_find(factory);
  if (f) gst_object_unref(f);
  return f != nullptr;
}

namespace {

GEnumClass* enum_of(const char* factory, const char* property, GstElement** element) {
  ensure_gstreamer();
  *element = gst_element_factory_make(factory, nullptr);
  if (!*element) return nullptr;
  GParamSpec* spec = g_object_class_find_property(G_OBJECT_GET_CLASS(*element), property);
  if (!spec || !G_IS_PARAM_SPEC_ENUM(spec)) return nullptr;
  return G_PARAM_SPEC_ENUM(spec)->enum_class;
}

}  // namespace

std::string enum_nicks(const char* factory, const char* property) {
  GstElement* e = nullptr;
  std::string out;
  if (GEnumClass* c = enum_of(factory, property, &e)) {
    for (guint i = 0; i < c->n_values; ++i) out += fmt::format("{}{}", out.empty() ? "" : ", ", c->values[i].value_nick);
  }
  if (e) gst_object_unref(e);
  return out;
}

bool is_enum_nick(const char* factory, const char* property, const std::string& nick) {
  GstElement* e = nullptr;
  bool found = false;
  if (GEnumClass* c = enum_of(factory, property, &e)) found = g_enum_get_value_by_nick(c, nick.c_str()) != nullptr;
  if (e) gst_object_unref(e);
  return found;
}

}  // namespace vc::pipeline
