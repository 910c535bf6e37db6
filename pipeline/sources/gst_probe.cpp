#include "pipeline/sources/gst_probe.hpp"

#include <mutex>

#include <fmt/format.h>

#include <gst/gst.h>

#include "pipeline/sources/gst_util.hpp"

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
      {"ximagesink", "display output on X11 (gstreamer1.0-x)", false, false},
      {"waylandsink", "display output on Wayland", false, false},
      {"parsebin", "demuxing and parsing of files and streams", true, false},
      {"urisourcebin", "uri inputs", true, false},
      {"jpegenc", "labelled image output", false, false},
  };
  for (auto& e : elements) e.present = has_element(e.name.c_str());
  return elements;
}

std::string describe_cameras() {
  GstDeviceMonitor* monitor = gst_device_monitor_new();
  gst_device_monitor_add_filter(monitor, "Video/Source", nullptr);
  std::string text = "cameras found:";
  int count = 0;
  if (gst_device_monitor_start(monitor)) {
    GList* devices = gst_device_monitor_get_devices(monitor);
    for (GList* d = devices; d; d = d->next) {
      auto* device = GST_DEVICE(d->data);
      gchar* name = gst_device_get_display_name(device);
      std::string modes;
      if (GstCaps* caps = gst_device_get_caps(device)) {
        for (guint i = 0; i < gst_caps_get_size(caps) && i < 12; ++i) {
          const GstStructure* s = gst_caps_get_structure(caps, i);
          int w = 0, h = 0;
          gst_structure_get_int(s, "width", &w);
          gst_structure_get_int(s, "height", &h);
          modes += fmt::format("{}{}x{} {}", modes.empty() ? "" : ", ", w, h, gst_structure_get_name(s));
        }
        gst_caps_unref(caps);
      }
      text += fmt::format("\n  {}: {}", name ? name : "?", modes);
      g_free(name);
      ++count;
    }
    g_list_free_full(devices, gst_object_unref);
    gst_device_monitor_stop(monitor);
  }
  gst_object_unref(monitor);
  return count ? text : "no cameras found (is one plugged in, and are you in the 'video' group?)";
}

}  // namespace vc::pipeline
