// The media zoo (scripts/make-media-zoo.sh): every codec, container and awkward case the app meets is either
// classified with the same top-1 as a reference decode on every frame, or refused with its reason — never a crash,
// never silently wrong. The reference: the codec's libav decoder (aom's for AV1, which libav does not have here),
// turned upright by videoflip and deinterlaced as the app does, converted to BGR by videoconvert, classified by the
// same model through the same engine.
#include <doctest/doctest.h>
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <map>

#include "config/config.hpp"
#include "inference/classifier.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("zoo");

namespace {

struct ZooFile {
  std::string name, file, what;
};

// The zoo, made once per test process.
const std::vector<ZooFile>& zoo() {
  static const auto files = [] {
    const auto dir = path("zoo");
    const auto r = run_command("scripts/make-media-zoo.sh '" + dir + "' 40");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    std::vector<ZooFile> out;
    std::ifstream manifest(dir + "/manifest.tsv");
    for (std::string line; std::getline(manifest, line);) {
      std::istringstream in(line);
      ZooFile z;
      std::getline(in, z.name, '\t');
      std::getline(in, z.file, '\t');
      std::getline(in, z.what);
      z.file = dir + "/" + z.file;
      out.push_back(z);
    }
    return out;
  }();
  return files;
}

std::string reference_decoder(const std::string& name) {
  static const std::map<std::string, std::string> by_prefix = {
      {"h264", "avdec_h264"},   {"h265", "avdec_h265"},         {"vp8", "avdec_vp8"},     {"vp9", "avdec_vp9"},
      {"av1", "av1dec"},        {"mpeg2", "avdec_mpeg2video"},  {"mpeg4", "avdec_mpeg4"}, {"mjpeg", "avdec_mjpeg"}};
  for (const auto& [prefix, decoder] : by_prefix) {
    if (name.rfind(prefix, 0) == 0) return decoder;
  }
  return "";
}

// Top-1 class of every frame of `file` through the reference decode (test code: a fixed launch line).
std::vector<int> reference_top1(const std::string& file, const std::string& decoder, inference::Classifier& model) {
  GError* error = nullptr;
  pipeline::PipelinePtr p{gst_parse_launch(("filesrc location=\"" + file + "\" ! parsebin ! " + decoder +
                                            " ! deinterlace ! videoflip video-direction=auto ! videoconvert ! "
                                            "video/x-raw,format=BGR ! appsink name=sink sync=false").c_str(), &error)};
  REQUIRE_MESSAGE(p, (error ? error->message : "?"));
  GstElement* sink = gst_bin_get_by_name(GST_BIN(p.get()), "sink");
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  std::vector<int> top1;
  for (;;) {
    GstSample* sample = gst_app_sink_pull_sample(GST_APP_SINK(sink));
    if (!sample) break;
    GstVideoInfo info;
    REQUIRE(gst_video_info_from_caps(&info, gst_sample_get_caps(sample)));
    GstVideoFrame frame;
    REQUIRE(gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample), GST_MAP_READ));
    inference::FrameView view;
    view.format = inference::PixelFormat::BGR;
    view.width = GST_VIDEO_FRAME_WIDTH(&frame);
    view.height = GST_VIDEO_FRAME_HEIGHT(&frame);
    view.planes[0] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
    view.strides[0] = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0);
    const auto logits = model.classify(std::span<const inference::FrameView>(&view, 1));
    top1.push_back(argmax(logits.front()));
    gst_video_frame_unmap(&frame);
    gst_sample_unref(sample);
  }
  gst_object_unref(sink);
  return top1;
}

std::vector<int> app_top1(const std::string& results) {
  std::vector<int> out;
  for (const auto& j : read_jsonl(results)) {
    if (j.contains("top")) out.push_back(j["top"][0]["index"].get<int>());
  }
  return out;
}

std::string default_app(const std::string& args) {
  return "timeout --foreground 120 '" + std::string(VC_APP_BINARY) + "' --config assets/configs/default.yaml "
         "--set inference.device=cpu --set logging.level=warn --output none " + args;
}

}  // namespace

TEST_CASE("every file of the media zoo: each frame's top-1 equals the reference decode's") {
  pipeline::ensure_gstreamer();
  auto c = config::load_config(source_dir() + "/assets/configs/default.yaml");
  c.inference.device = config::Device::Cpu;
  c.logging.level = "warn";
  auto model = inference::Classifier::create(c);
  for (const auto& z : zoo()) {
    CAPTURE(z.name);
    CAPTURE(z.what);
    const auto decoder = reference_decoder(z.name);
    REQUIRE(!decoder.empty());
    const auto reference = reference_top1(z.file, decoder, *model);
    CHECK(reference.size() >= 40);
    const auto results = path("zoo-" + z.name + ".jsonl");
    const auto r = run_command(default_app("--input '" + z.file + "' --set output.results='" + results + "'"));
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const auto got = app_top1(results);
    REQUIRE(got.size() == reference.size());
    int same = 0;
    for (size_t i = 0; i < got.size(); ++i) same += got[i] == reference[i];
    CHECK(same == int(got.size()));
  }
}

TEST_CASE("where libav is absent: High-profile H.264 is refused, not decoded wrongly by openh264; Baseline goes on") {
  const auto by_name = [](const std::string& name) {
    for (const auto& z : zoo()) {
      if (z.name == name) return z.file;
    }
    FAIL("no zoo file " << name);
    return std::string();
  };
  // Rank avdec_h264 and avdec_h265 out, as a machine without gstreamer1.0-libav would be.
  const std::string no_libav = "GST_PLUGIN_FEATURE_RANK=avdec_h264:NONE,avdec_h265:NONE ";
  auto r = run_command(no_libav + default_app("--input '" + by_name("h264-high-avi") + "'"));
  CHECK(r.code == 69);
  CHECK(r.output.find("H.264 high, 8-bit 4:2:0") != std::string::npos);
  CHECK(r.output.find("openh264 decodes only Constrained Baseline") != std::string::npos);
  const auto results = path("zoo-openh264-baseline.jsonl");
  r = run_command(no_libav + default_app("--input '" + by_name("h264-baseline-mp4") + "' --set output.results='" +
                                         results + "' --log-level info"));
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("openh264dec") != std::string::npos);
  CHECK(frame_lines(results) >= 40);
  // 10-bit HEVC with only libde265 (which corrupts memory on it): refused, never a crash.
  r = run_command(no_libav + default_app("--input '" + by_name("h265-main10-mkv") + "'"));
  CHECK(r.code == 69);
  CHECK(r.output.find("H.265 main-10, 10-bit 4:2:0") != std::string::npos);
  CHECK(r.output.find("libde265") != std::string::npos);
}

TEST_SUITE_END();
