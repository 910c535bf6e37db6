// The video outputs on their own: the RTSP server's teardown and its bounded client queues.
#include <doctest/doctest.h>
#include <gst/gst.h>

#include <atomic>
#include <thread>

#include "pipeline/outputs/video_output.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("outputs");

namespace {

pipeline::VideoOutput::Options rtsp_options(const std::string& port, int width, int height) {
  pipeline::VideoOutput::Options o;
  o.output.kind = config::OutputKind::Rtsp;
  o.output.codec = config::Codec::X264;
  o.output.rtsp_address = "127.0.0.1";
  o.output.rtsp_port = std::stoi(port);
  o.path = "/x";
  o.width = width;
  o.height = height;
  o.fps = 30;
  o.name = "test";
  return o;
}

// Ends the test process if `done` is not set within `limit` (a hang would otherwise stall the whole suite).
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, const char* what)
      : thread_([this, limit, what] {
          const auto until = std::chrono::steady_clock::now() + limit;
          while (!done_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          if (!done_) {
            std::fprintf(stderr, "HANG: %s did not finish within %lld s\n", what, static_cast<long long>(limit.count()));
            std::_Exit(1);
          }
        }) {}
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("an RTSP output opened and closed at once never hangs (its loop may not have started yet)") {
  pipeline::ensure_gstreamer();
  Watchdog watchdog(std::chrono::seconds(60), "opening and closing RTSP outputs");
  for (int i = 0; i < 30; ++i) {
    auto out = pipeline::VideoOutput::open(rtsp_options(free_port(23000), 64, 48));
    out.reset();  // straight away: the server thread may not have entered its main loop
  }
  CHECK(true);
}

TEST_CASE("an RTSP client that cannot keep up: frames are skipped and counted, pushes never wait") {
  pipeline::ensure_gstreamer();
  const auto port = free_port(23000);
  auto out = pipeline::VideoOutput::open(rtsp_options(port, 1920, 1080));
  pipeline::PipelinePtr client{gst_parse_launch(
      ("rtspsrc location=rtsp://127.0.0.1:" + port + "/x latency=0 ! rtph264depay ! fakesink sync=false").c_str(), nullptr)};
  REQUIRE(client);
  gst_element_set_state(client.get(), GST_STATE_PLAYING);
  const cv::Mat frame(1080, 1920, CV_8UC3, cv::Scalar(40, 90, 160));
  // x264 encodes 1080p far slower than frames can be handed over: once the client is there, frames are skipped.
  const auto started = std::chrono::steady_clock::now();
  int64_t pushed = 0;
  double longest_push_s = 0;
  while (out->dropped() == 0 && seconds_since(started) < 30) {
    const auto before = std::chrono::steady_clock::now();
    out->push({frame, int64_t(pushed) * 33'000'000, pushed, "test", ""});
    longest_push_s = std::max(longest_push_s, seconds_since(before));
    ++pushed;
  }
  CHECK(out->dropped() > 0);
  CHECK(longest_push_s < 2);  // never blocked behind the encoder
  out->finish();
}

TEST_SUITE_END();
