#include "pipeline/outputs/appsrc_feed.hpp"

#include <gst/app/gstappsrc.h>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {

void throw_output_error(GstMessage* m, const std::string& what) {
  GError* error = nullptr;
  gst_message_parse_error(m, &error, nullptr);
  const bool write = error && error->domain == GST_RESOURCE_ERROR &&
                     (error->code == GST_RESOURCE_ERROR_WRITE || error->code == GST_RESOURCE_ERROR_NO_SPACE_LEFT ||
                      error->code == GST_RESOURCE_ERROR_OPEN_WRITE || error->code == GST_RESOURCE_ERROR_CLOSE);
  const bool full = error && error->domain == GST_RESOURCE_ERROR && error->code == GST_RESOURCE_ERROR_NO_SPACE_LEFT;
  if (error) g_error_free(error);
  const auto message = fmt::format("{}: {}{}", what, full ? "the disk is full, the video cannot be written: " : "",
                                   describe_error(m));
  if (write) throw IoError(message);
  throw UnavailableError(message);
}

void wait_for_room(GstElement* appsrc, GstBus* bus, const std::string& what, std::chrono::seconds stuck) {
  auto* src = GST_APP_SRC(appsrc);
  const guint64 limit = gst_app_src_get_max_bytes(src);
  guint64 level = gst_app_src_get_current_level_bytes(src);
  auto progress = std::chrono::steady_clock::now();
  while (level >= limit) {
    if (MessagePtr m{gst_bus_timed_pop_filtered(bus, 20 * GST_MSECOND, GST_MESSAGE_ERROR)}) throw_output_error(m.get(), what);
    const guint64 now = gst_app_src_get_current_level_bytes(src);
    if (now < level) progress = std::chrono::steady_clock::now();
    level = now;
    if (std::chrono::steady_clock::now() - progress > stuck) {
      throw IoError(fmt::format("{}: the pipeline took nothing for {} s", what, stuck.count()));
    }
  }
}

void write_image_file(const cv::Mat& bgr, const std::string& file, bool png) {
  PipelinePtr p = make_pipeline(nullptr);
  GstElement* src = add_element(p.get(), "appsrc", "src");
  CapsPtr caps(gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "BGR", "width", G_TYPE_INT, bgr.cols, "height",
                                   G_TYPE_INT, bgr.rows, "framerate", GST_TYPE_FRACTION, 1, 1, nullptr));
  g_object_set(src, "caps", caps.get(), "format", GST_FORMAT_TIME, nullptr);
  GstElement* sink = add_element(p.get(), "filesink");
  g_object_set(sink, "location", file.c_str(), nullptr);
  link_chain({src, add_element(p.get(), "videoconvert"), add_element(p.get(), png ? "pngenc" : "jpegenc"), sink});
  BusPtr bus(gst_element_get_bus(p.get()));
  if (gst_element_set_state(p.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    throw CantCreateError(fmt::format("{}: cannot write the image", file));
  }
  const cv::Mat packed = bgr.isContinuous() ? bgr : bgr.clone();
  const size_t bytes = packed.total() * packed.elemSize();
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, bytes, nullptr);
  gst_buffer_fill(buffer, 0, packed.data, bytes);
  GST_BUFFER_PTS(buffer) = 0;
  GST_BUFFER_DURATION(buffer) = GST_SECOND;
  gst_app_src_push_buffer(GST_APP_SRC(src), buffer);
  gst_app_src_end_of_stream(GST_APP_SRC(src));
  MessagePtr m{gst_bus_timed_pop_filtered(bus.get(), 30 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR))};
  if (!m) throw IoError(fmt::format("{}: the image was not written within 30 s", file));
  if (GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) throw_output_error(m.get(), file);
}

}  // namespace vc::pipeline
