#include "pipeline/gst_probe.hpp"

#include <mutex>

#include <gst/gst.h>

#include "pipeline/gst_util.hpp"

namespace vc::pipeline {

void ensure_gstreamer() {
  static std::once_flag once;
  std::call_once(once, [] { gst_init(nullptr, nullptr); });
}

std::string gstreamer_version() {
  ensure_gstreamer();
  gchar* v = gst_version_string();
  std::string s(v);
  g_free(v);
  return s;
}

std::vector<ElementStatus> probe_elements() {
  ensure_gstreamer();
  std::vector<ElementStatus> elements = {
      {"appsink", "hands decoded frames to the app", true, false},
      {"appsrc", "takes labelled frames from the app", true, false},
      {"videoconvert", "colour conversion", true, false},
      {"videoscale", "resizing to the requested resolution", true, false},
      {"decodebin", "file inputs (any container/codec)", true, false},
      {"uridecodebin", "uri inputs", true, false},
      {"videotestsrc", "test input", true, false},
      {"h264parse", "H.264 output", true, false},
      {"mp4mux", "MP4 output", true, false},
      {"x264enc", "H.264 encoding on the CPU", false, false},
      {"openh264enc", "H.264 encoding on the CPU (fallback)", false, false},
      {"nvh264enc", "H.264 encoding on the GPU (NVENC)", false, false},
      {"nvh264dec", "H.264 decoding on the GPU (NVDEC)", false, false},
      {"avdec_h264", "H.264 decoding on the CPU (libav)", false, false},
      {"openh264dec", "H.264 decoding on the CPU (openh264)", false, false},
      {"matroskamux", "MKV output", false, false},
      {"v4l2src", "webcam input", false, false},
      {"jpegdec", "MJPEG webcams and JPEG images", false, false},
      {"pngdec", "PNG images", false, false},
      {"rtspsrc", "rtsp:// inputs", false, false},
      {"rtph264pay", "RTSP output (with libgstrtspserver)", false, false},
      {"autovideosink", "display output", false, false},
  };
  for (auto& e : elements) e.present = has_element(e.name.c_str());
  return elements;
}

}  // namespace vc::pipeline
