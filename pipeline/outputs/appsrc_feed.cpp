#include "pipeline/outputs/appsrc_feed.hpp"

#include <gst/app/gstappsink.h>
#include <gst/app/gstappsrc.h>

#include <algorithm>
#include <cstring>

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

namespace {

// appsrc (one BGR image) -> videoconvert -> `encoder` -> `sink`, playing, with the image pushed and the end sent.
void encode_image(GstElement* pipeline, GstElement* encoder, GstElement* sink, const cv::Mat& bgr, const std::string& what) {
  GstElement* src = add_element(pipeline, "appsrc", "src");
  CapsPtr caps(gst_caps_new_simple("video/x-raw", "format", G_TYPE_STRING, "BGR", "width", G_TYPE_INT, bgr.cols, "height",
                                   G_TYPE_INT, bgr.rows, "framerate", GST_TYPE_FRACTION, 1, 1, nullptr));
  g_object_set(src, "caps", caps.get(), "format", GST_FORMAT_TIME, nullptr);
  link_chain({src, add_element(pipeline, "videoconvert"), encoder, sink});
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    throw CantCreateError(fmt::format("{}: cannot encode the image", what));
  }
  // GStreamer's packed RGB rows start on 4-byte boundaries: a width whose rows are not a multiple of 4 bytes is
  // padded row by row (a plain copy would be read skewed, or refused for its size).
  const size_t row = size_t(bgr.cols) * 3, stride = (row + 3) & ~size_t(3);
  GstBuffer* buffer = gst_buffer_new_allocate(nullptr, stride * size_t(bgr.rows), nullptr);
  GstMapInfo map;
  if (!gst_buffer_map(buffer, &map, GST_MAP_WRITE)) {
    gst_buffer_unref(buffer);
    throw CantCreateError(fmt::format("{}: cannot encode the image", what));
  }
  for (int y = 0; y < bgr.rows; ++y) {
    std::memcpy(map.data + size_t(y) * stride, bgr.ptr(y), row);
    std::memset(map.data + size_t(y) * stride + row, 0, stride - row);
  }
  gst_buffer_unmap(buffer, &map);
  GST_BUFFER_PTS(buffer) = 0;
  GST_BUFFER_DURATION(buffer) = GST_SECOND;
  gst_app_src_push_buffer(GST_APP_SRC(src), buffer);
  gst_app_src_end_of_stream(GST_APP_SRC(src));
}

}  // namespace

void write_image_file(const cv::Mat& bgr, const std::string& file, bool png) {
  PipelinePtr p = make_pipeline(nullptr);
  GstElement* sink = add_element(p.get(), "filesink");
  g_object_set(sink, "location", file.c_str(), nullptr);
  encode_image(p.get(), add_element(p.get(), png ? "pngenc" : "jpegenc"), sink, bgr, file);
  BusPtr bus(gst_element_get_bus(p.get()));
  MessagePtr m{gst_bus_timed_pop_filtered(bus.get(), 30 * GST_SECOND, GstMessageType(GST_MESSAGE_EOS | GST_MESSAGE_ERROR))};
  if (!m) throw IoError(fmt::format("{}: the image was not written within 30 s", file));
  if (GST_MESSAGE_TYPE(m.get()) == GST_MESSAGE_ERROR) throw_output_error(m.get(), file);
}

std::string encode_jpeg(const cv::Mat& bgr, int quality) {
  PipelinePtr p = make_pipeline(nullptr);
  GstElement* encoder = add_element(p.get(), "jpegenc");
  g_object_set(encoder, "quality", std::clamp(quality, 1, 100), nullptr);
  GstElement* sink = add_element(p.get(), "appsink");
  g_object_set(sink, "sync", FALSE, nullptr);
  encode_image(p.get(), encoder, sink, bgr, "snapshot");
  SamplePtr sample{gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND)};
  if (!sample) {
    BusPtr bus(gst_element_get_bus(p.get()));
    if (MessagePtr m{gst_bus_pop_filtered(bus.get(), GST_MESSAGE_ERROR)}) {
      throw UnavailableError(fmt::format("snapshot: cannot encode the image: {}", describe_error(m.get())));
    }
    throw UnavailableError("snapshot: the image was not encoded within 10 s");
  }
  GstBuffer* buffer = gst_sample_get_buffer(sample.get());
  GstMapInfo map;
  if (!buffer || !gst_buffer_map(buffer, &map, GST_MAP_READ)) throw UnavailableError("snapshot: cannot read the encoded image");
  std::string jpeg(reinterpret_cast<const char*>(map.data), map.size);
  gst_buffer_unmap(buffer, &map);
  return jpeg;
}

}  // namespace vc::pipeline
