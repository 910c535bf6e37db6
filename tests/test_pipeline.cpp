// The application end to end with real GStreamer pipelines (CPU engine): labelled MP4s that GStreamer reads
// back with the right frame count and duration, JSON lines per frame, Ctrl-C leaving a playable file, bad inputs
// failing fast with the right exit code, the drop policy, and the overlay's pixels.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <opencv2/core.hpp>

#include "config/config.hpp"
#include "pipeline/overlay.hpp"
#include "pipeline/source.hpp"
#include "test_helpers.hpp"

using namespace vc;
using namespace vc::pipeline;
namespace fs = std::filesystem;
using vc::test::run_command;

TEST_SUITE_BEGIN("pipeline");

namespace {

fs::path work_dir() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("vc-pipeline-" + std::to_string(getpid()));
    fs::create_directories(d);
    std::ofstream labels(d / "labels.txt");
    for (int i = 0; i < 10; ++i) labels << "class-" << i << "\n";
    return d;
  }();
  return dir;
}

// The app on the small fixture model with the CPU engine, plus `args`; `timeout 60` guards against hangs.
// --foreground: a signal sent to timeout reaches the app once (without it, timeout also signals its whole
// process group, and a second Ctrl-C means "quit at once").
std::string app(const std::string& args) {
  return "timeout --foreground 60 '" + std::string(VC_APP_BINARY) + "' --model '" + vc::test::fixture("basic_narrow.safetensors") +
         "' --set model.labels='" + (work_dir() / "labels.txt").string() +
         "' --set model.input_size=64 --set inference.device=cpu --log-level warn " + args;
}

std::string path(const std::string& name) { return (work_dir() / name).string(); }

// Frames GStreamer decodes from a video file (through our own file source: no drops).
int64_t count_frames(const std::string& file) {
  config::Input in;
  in.kind = "file";
  in.path = file;
  auto source = Source::open(in);
  int64_t n = 0;
  while (source->next()) ++n;
  return n;
}

// gst-discoverer-1.0's duration in seconds, or -1.
double discovered_duration(const std::string& file) {
  const auto r = run_command("gst-discoverer-1.0 '" + file + "'");
  std::smatch m;
  static const std::regex duration(R"(Duration: (\d+):(\d+):(\d+\.\d+))");
  if (r.code != 0 || !std::regex_search(r.output, m, duration)) return -1;
  return std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]);
}

int64_t frame_lines(const std::string& jsonl) {
  std::ifstream in(jsonl);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind("{\"frame\":", 0) == 0;
  return n;
}

// A small H.264 MP4 made by GStreamer itself.
std::string make_video(const std::string& name, int frames) {
  const auto file = path(name);
  const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=" + std::to_string(frames) +
                             " pattern=ball ! video/x-raw,width=320,height=240,framerate=25/1 ! videoconvert ! "
                             "video/x-raw,format=I420 ! x264enc ! h264parse ! mp4mux ! filesink location='" + file + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  return file;
}

}  // namespace

TEST_CASE("test pattern in -> labelled MP4 with the right frame count and duration, one JSON line per frame") {
  const auto out = path("pattern.mp4"), jsonl = path("pattern.jsonl");
  const auto r = run_command(app("--input test:ball --set input.max_frames=45 --set input.fps=30 --output '" + out +
                                 "' --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(count_frames(out) == 45);
  CHECK(discovered_duration(out) == doctest::Approx(1.5).epsilon(0.02));
  CHECK(frame_lines(jsonl) == 45);
}

TEST_CASE("an encoded file in -> labelled MP4 out: every frame, nothing dropped") {
  const auto in = make_video("input.mp4", 40), out = path("labelled.mkv"), jsonl = path("labelled.jsonl");
  const auto r = run_command(app("--input '" + in + "' --output '" + out + "' --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(count_frames(out) == 40);
  CHECK(discovered_duration(out) == doctest::Approx(1.6).epsilon(0.02));
  CHECK(frame_lines(jsonl) == 40);
  std::ifstream results(jsonl);
  std::string first;
  std::getline(results, first);
  CHECK(first.find("\"top\":[{\"index\":") != std::string::npos);
  CHECK(first.find("\"label\":\"class-") != std::string::npos);
}

TEST_CASE("Ctrl-C during a recording still leaves a playable MP4") {
  const auto out = path("interrupted.mp4");
  fs::remove(out);
  const auto started = std::chrono::steady_clock::now();
  // The app in the background on an endless live pattern; SIGINT after 2 s; wait for it.
  const auto r = run_command("(" + app("--input test --output '" + out + "'") + ") & pid=$!; sleep 2; kill -INT $pid; wait $pid");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(seconds < 20);
  const auto frames = count_frames(out);
  CHECK(frames > 10);
  CHECK(discovered_duration(out) > 0.3);
}

TEST_CASE("the RTSP output serves the labelled stream to a client (loopback)") {
  const std::string port = std::to_string(20000 + getpid() % 20000);
  // The app serves a live pattern; a GStreamer client on 127.0.0.1 must decode 10 frames from it.
  const auto r = run_command("(" + app("--input test --set input.fps=15 --output rtsp://127.0.0.1:" + port + "/live") +
                             ") & pid=$!; sleep 3; timeout 20 gst-launch-1.0 -q rtspsrc location=rtsp://127.0.0.1:" + port +
                             "/live protocols=tcp ! rtph264depay ! h264parse ! openh264dec ! fakesink num-buffers=10; "
                             "rc=$?; kill -INT $pid; wait $pid; exit $rc");
  CHECK_MESSAGE(r.code == 0, r.output);
}

TEST_CASE("bad inputs end quickly with a clear message and the documented exit code") {
  const auto empty = path("empty.mp4"), noise = path("noise.mp4"), truncated = path("truncated.mp4");
  std::ofstream(empty).close();
  {
    std::ofstream out(noise, std::ios::binary);
    for (int i = 0; i < 200000; ++i) out.put(char(vc::test::rng()() & 0xff));
  }
  {
    const auto good = make_video("whole.mp4", 50);
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  struct Case {
    std::string input;
    int code;
    const char* says;
  };
  for (const auto& c : {Case{empty, 65, "empty"}, Case{noise, 65, "element"}, Case{truncated, 65, "element"},
                        Case{path("missing.mp4"), 66, "no such file"}, Case{"/dev/video97", 66, "no such camera"},
                        Case{path("no-images/*.jpg"), 66, "no images"}}) {
    CAPTURE(c.input);
    const auto started = std::chrono::steady_clock::now();
    const auto r = run_command(app("--input '" + c.input + "' --output none"));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    CAPTURE(r.output);
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.says) != std::string::npos);
    CHECK(seconds < 20);
  }
}

TEST_CASE("an output that cannot be written is a clear error") {
  const auto r = run_command(app("--input test --set input.max_frames=5 --output /proc/forbidden/out.mp4"));
  CHECK(r.code == 66);
  CHECK(r.output.find("/proc/forbidden") != std::string::npos);
}

TEST_CASE("a slow consumer makes a live source drop frames, never a file") {
  using namespace std::chrono_literals;
  config::Input live;
  live.kind = "test";
  live.fps = 60;
  live.width = 160;
  live.height = 120;
  auto camera = Source::open(live);
  int64_t got = 0, last_index = -1;
  bool increasing = true;
  for (int i = 0; i < 12; ++i) {
    auto f = camera->next();
    REQUIRE(f.has_value());
    increasing &= f->index > last_index;
    last_index = f->index;
    ++got;
    std::this_thread::sleep_for(100ms);  // 10 fps consumer, 60 fps camera
  }
  CHECK(increasing);
  CHECK(camera->dropped() > 20);
  MESSAGE("live: consumed " << got << ", dropped " << camera->dropped());

  config::Input file;
  file.kind = "file";
  file.path = make_video("slow.mp4", 20);
  auto movie = Source::open(file);
  int64_t frames = 0;
  while (auto f = movie->next()) {
    CHECK(f->index == frames);
    ++frames;
    std::this_thread::sleep_for(30ms);
  }
  CHECK(frames == 20);
  CHECK(movie->dropped() == 0);
}

TEST_CASE("the overlay draws its panel, bars and text where configured") {
  cv::Mat image(480, 640, CV_8UC3, cv::Scalar(255, 255, 255));  // a bright frame
  config::Overlay style;
  style.position = "bottom-right";
  style.bar_color = {0, 0, 255};  // pure blue bars (BGR 255, 0, 0)
  style.background_alpha = 1.0;
  OverlayContent content;
  content.top = {{3, 0.75f, "cat"}, {5, 0.25f, "dog"}};
  content.smoothed_label = "cat";
  content.smoothed_score = 0.7f;
  content.fps = 29.97;
  content.latency_ms = 12.5;
  const auto panel = draw_overlay(image, content, style);
  REQUIRE(panel.area() > 0);
  CHECK(panel.x + panel.width > 600);   // right edge
  CHECK(panel.y + panel.height > 440);  // bottom edge
  CHECK(image.at<cv::Vec3b>(5, 5) == cv::Vec3b(255, 255, 255));  // outside the panel: untouched
  // Inside: the panel is black where there is no text or bar; blue bars; white text pixels.
  int blue = 0, white = 0, black = 0;  // text is anti-aliased: count near-white pixels
  for (int y = panel.y; y < panel.y + panel.height; ++y)
    for (int x = panel.x; x < panel.x + panel.width; ++x) {
      const auto p = image.at<cv::Vec3b>(y, x);
      blue += p == cv::Vec3b(255, 0, 0);
      white += p[0] > 200 && p[1] > 200 && p[2] > 200;
      black += p == cv::Vec3b(0, 0, 0);
    }
  CHECK(blue > 100);
  CHECK(white > 50);
  CHECK(black > panel.area() / 2);
  // The 75% bar is three times the 25% bar: count blue pixels per row and compare the two bars' widths.
  std::vector<int> widths;
  for (int y = panel.y; y < panel.y + panel.height; ++y) {
    int w = 0;
    for (int x = panel.x; x < panel.x + panel.width; ++x) w += image.at<cv::Vec3b>(y, x) == cv::Vec3b(255, 0, 0);
    if (w > 0 && (widths.empty() || std::abs(widths.back() - w) > 2)) widths.push_back(w);
  }
  REQUIRE(widths.size() == 2);
  CHECK(double(widths[0]) / widths[1] == doctest::Approx(3.0).epsilon(0.1));

  config::Overlay off = style;
  off.enabled = false;
  cv::Mat untouched(100, 100, CV_8UC3, cv::Scalar(1, 2, 3));
  CHECK(draw_overlay(untouched, content, off).area() == 0);
  CHECK(untouched.at<cv::Vec3b>(50, 50) == cv::Vec3b(1, 2, 3));
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("accuracy");

TEST_CASE("the default config classifies the bundled sample video: >= 90% frame accuracy against its ground truth") {
  const auto jsonl = path("default.jsonl");
  auto r = run_command("timeout 600 '" + std::string(VC_APP_BINARY) + "' --config assets/configs/default.yaml " +
                       "--set inference.device=cpu --output none --set output.results='" + jsonl + "' --log-level warn");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(frame_lines(jsonl) == 600);
  r = run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + jsonl +
                  "' --ground-truth assets/video/fashion-mnist-sample.truth.txt");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex(R"(frame accuracy: ([0-9.]+)%)")));
  MESSAGE("sample video, CPU engine: " << m[1] << "% frame accuracy");
  CHECK(std::stod(m[1]) >= 90.0);
  CHECK(r.output.find("confusion matrix") != std::string::npos);
}

TEST_CASE("evaluate scores against a truth file or another results file, and rejects bad files") {
  const auto results = path("eval.jsonl"), truth = path("eval-truth.txt");
  {
    std::ofstream out(results);
    out << R"({"frame":0,"top":[{"label":"cat","index":0,"score":0.9}]})" << "\n"
        << R"({"event":"label_change","frame":0,"from":null,"to":"cat"})" << "\n"
        << R"({"frame":1,"top":[{"label":"dog","index":1,"score":0.8}]})" << "\n"
        << R"({"frame":2,"top":[{"label":"cat","index":0,"score":0.7}]})" << "\n";
    std::ofstream(truth) << "0\tcat\n1\tcat\n2\tcat\n3\tdog\n";
  }
  auto r = run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + results + "' --ground-truth '" + truth + "'");
  CHECK(r.code == 0);
  CHECK(r.output.find("frame accuracy: 66.67% (2/3)") != std::string::npos);
  CHECK(r.output.find("1 in the ground truth without a result") != std::string::npos);
  r = run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + results + "' --ground-truth '" + results + "'");
  CHECK(r.output.find("frame accuracy: 100.00% (3/3)") != std::string::npos);
  std::ofstream(truth) << "zero\tcat\n";
  CHECK(run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + results + "' --ground-truth '" + truth + "'").code == 65);
  CHECK(run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results /nonexistent.jsonl --ground-truth '" + truth + "'").code == 66);
}

TEST_SUITE_END();
