#include "pipeline/gst_util.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"
#include "pipeline/gst_probe.hpp"

namespace vc::pipeline {

PipelinePtr parse_pipeline(const std::string& description) {
  ensure_gstreamer();
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(description.c_str(), &error);
  if (error) {
    const std::string message = error->message;
    const bool missing = error->domain == GST_PARSE_ERROR && error->code == GST_PARSE_ERROR_NO_SUCH_ELEMENT;
    g_error_free(error);
    if (pipeline) gst_object_unref(pipeline);
    if (missing) {
      throw UnavailableError(fmt::format("GStreamer: {} (install the plugin package that provides it; see "
                                         "`video-classifier doctor`)", message));
    }
    throw InternalError(fmt::format("GStreamer could not build '{}': {}", description, message));
  }
  return PipelinePtr(pipeline);
}

ElementPtr child(GstElement* pipeline, const char* name) {
  GstElement* e = gst_bin_get_by_name(GST_BIN(pipeline), name);
  if (!e) throw InternalError(fmt::format("pipeline has no element named '{}'", name));
  return ElementPtr(e);
}

std::string describe_error(GstMessage* m) {
  GError* error = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(m, &error, &debug);
  std::string text = fmt::format("element '{}': {}", GST_OBJECT_NAME(GST_MESSAGE_SRC(m)), error ? error->message : "?");
  if (debug && *debug) {
    std::string d = debug;
    if (d.size() > 300) d = d.substr(0, 300) + "…";
    text += fmt::format(" ({})", d);
  }
  if (error) g_error_free(error);
  g_free(debug);
  return text;
}

void stop_pipeline(GstElement* pipeline) noexcept {
  if (!pipeline) return;
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_element_get_state(pipeline, nullptr, nullptr, 5 * GST_SECOND);
}

bool has_element(const char* factory) {
  ensure_gstreamer();
  GstElementFactory* f = gst_element_factory_find(factory);
  if (f) gst_object_unref(f);
  return f != nullptr;
}

}  // namespace vc::pipeline
