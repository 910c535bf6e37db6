// The application end to end with real GStreamer pipelines (CPU engine): labelled videos that GStreamer reads
// back with the right frame count and duration, JSON lines per frame, images in and out, the display under
// Xvfb, results on stdout through a pipe, odd and changing frame sizes, bad inputs failing fast with the right
// exit code and message, and the overlay's pixels.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include <opencv2/core.hpp>

#include "pipeline/outputs/overlay.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;
using vc::pipeline::OverlayContent;

TEST_SUITE_BEGIN("pipeline");

TEST_CASE("test pattern in -> labelled MP4 with the right frame count and duration, one JSON line per frame") {
  const auto out = path("pattern.mp4"), jsonl = path("pattern.jsonl");
  const auto r = run_command(app("--input test:ball --set input.max_frames=45 --set input.fps=30 --output '" + out +
                                 "' --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(count_frames(out) == 45);
  CHECK(discovered_duration(out) == doctest::Approx(1.5).epsilon(0.02));
  CHECK(frame_lines(jsonl) == 45);
  CHECK(!fs::exists(out + ".partial"));  // written aside, renamed when complete
}

TEST_CASE("an encoded file in -> labelled MKV out: every frame, nothing dropped, lines in order with the stream name") {
  const auto in = make_video("input.mp4", 40), out = path("labelled.mkv"), jsonl = path("labelled.jsonl");
  const auto r = run_command(app("--input '" + in + "' --output '" + out + "' --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(count_frames(out) == 40);
  CHECK(discovered_duration(out) == doctest::Approx(1.6).epsilon(0.02));
  const auto lines = read_jsonl(jsonl);
  int64_t expected = 0;
  for (const auto& j : lines) {
    if (!j.contains("top")) continue;
    CHECK(j["stream"] == "stream0");
    CHECK(j["source"] == in);
    CHECK(j["frame"] == expected++);
    CHECK(j["top"][0]["label"].get<std::string>().rfind("class-", 0) == 0);
  }
  CHECK(expected == 40);
  CHECK(lines.back()["event"] == "stream_end");
}

TEST_CASE("the bundled model with its own card: --model and --input alone score >= 98% on the sample video") {
  // No --config: input size, letterbox, normalization and labels all come from the model file.
  const auto jsonl = path("card.jsonl");
  const auto r = run_command("timeout 600 '" + std::string(VC_APP_BINARY) + "' --model assets/models/resnet18-fashion-mnist.safetensors "
                             "--input assets/video/fashion-mnist-sample.mp4 --set inference.device=cpu --set inference.batch_size=8 "
                             "--output none --set output.results='" + jsonl + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("model.input_size = 128 (the model file)") != std::string::npos);
  CHECK(r.output.find("model.resize = letterbox (the model file)") != std::string::npos);
  CHECK(r.output.find("10 names (from the model file)") != std::string::npos);
  const auto e = run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + jsonl +
                             "' --ground-truth assets/video/fashion-mnist-sample.truth.txt");
  std::smatch m;
  REQUIRE(std::regex_search(e.output, m, std::regex(R"(frame accuracy: ([0-9.]+)%)")));
  CHECK(std::stod(m[1]) >= 98.0);
  // FPS is frames over wall time at any batch size: the stream's own rate agrees with the total.
  std::smatch s;
  REQUIRE(std::regex_search(r.output, s, std::regex(R"(stream0\s+600\s+0\s+([0-9.]+))")));
  std::smatch t;
  REQUIRE(std::regex_search(r.output, t, std::regex(R"(total\s+600\s+0\s+([0-9.]+))")));
  CHECK(std::stod(s[1]) == doctest::Approx(std::stod(t[1])).epsilon(0.10));
}

TEST_CASE("images in: one result per image named after it, no smoothing across images, labelled images out") {
  const auto dir = path("images"), out = path("images-out/");
  fs::create_directories(dir);
  const auto make = [&](const std::string& name, int w, int h, const char* enc, const char* pattern) {
    const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=1 pattern=" + std::string(pattern) +
                               " ! video/x-raw,width=" + std::to_string(w) + ",height=" + std::to_string(h) + " ! " + enc +
                               " ! filesink location='" + dir + "/" + name + "'");
    REQUIRE_MESSAGE(r.code == 0, r.output);
  };
  make("a.jpg", 320, 240, "jpegenc", "ball");
  make("b.png", 97, 61, "pngenc", "smpte");
  make("c.jpg", 640, 480, "jpegenc", "snow");
  const auto jsonl = path("images.jsonl");
  const auto r = run_command(app("--input '" + dir + "' --output '" + out + "' --set output.results='" + jsonl + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto lines = read_jsonl(jsonl);
  std::vector<std::string> sources;
  for (const auto& j : lines) {
    CHECK(j.value("event", "") != "label_change");  // unrelated images have no label changes
    if (!j.contains("top")) continue;
    sources.push_back(j["source"]);
    CHECK(!j.contains("smoothed"));
    CHECK(j["pts"].is_null());
  }
  CHECK(sources == std::vector<std::string>{dir + "/a.jpg", dir + "/b.png", dir + "/c.jpg"});
  // Each labelled image keeps its own size (no stripes from a size mismatch).
  for (const auto& [name, w, h] : {std::tuple{"a.jpg", 320, 240}, {"b.png", 97, 61}, {"c.jpg", 640, 480}}) {
    CAPTURE(name);
    REQUIRE(fs::exists(out + name));
    const auto d = run_command("gst-discoverer-1.0 '" + out + name + "'");
    CHECK(d.output.find("Width: " + std::to_string(w)) != std::string::npos);
    CHECK(d.output.find("Height: " + std::to_string(h)) != std::string::npos);
  }
  // Mixed sizes into one video: every frame scaled to the first one's size, all three there.
  const auto video = path("images.mp4");
  REQUIRE(run_command(app("--input '" + dir + "' --output '" + video + "'")).code == 0);
  int w = 0, h = 0;
  CHECK(count_frames(video, &w, &h) == 3);
  CHECK((w == 320 && h == 240));
}

TEST_CASE("results on stdout: '-' works as typed, every line arrives as it is made (not buffered)") {
  // A live pattern at 2 fps: 3 lines over about 1.5 s. Buffered output would arrive all at once at the end.
  const auto r = run_command("(" + app("--input test --set input.fps=2 --set input.max_frames=3 --output none --set output.results=-") +
                             " 2>/dev/null | while IFS= read -r line; do echo \"$(date +%s.%N) $line\"; done)");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::vector<double> arrivals;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"top\"") == std::string::npos) continue;
    arrivals.push_back(std::stod(line.substr(0, line.find(' '))));
    CHECK(nlohmann::json::accept(line.substr(line.find(' ') + 1)));
  }
  REQUIRE(arrivals.size() == 3);
  CHECK(arrivals[2] - arrivals[0] > 0.6);  // the first line came out a frame period or more before the last
}

TEST_CASE("the display works under a virtual X server and fails clearly without one") {
  REQUIRE_MESSAGE(run_command("command -v xvfb-run").code == 0, "xvfb-run is missing: scripts/install-deps.sh installs xvfb");
  auto r = run_command("xvfb-run -a " + app("--input test --set input.max_frames=20 --output display"));
  CHECK_MESSAGE(r.code == 0, r.output);
  r = run_command("xvfb-run -a '" + std::string(VC_APP_BINARY) + "' doctor");
  CHECK(r.output.find("display") != std::string::npos);
  CHECK(r.output.find("ximagesink opens") != std::string::npos);
  const auto started = std::chrono::steady_clock::now();
  r = run_command("env -u DISPLAY -u WAYLAND_DISPLAY " + app("--input test --output display"));
  CHECK(r.code == 69);
  CHECK(r.output.find("no display") != std::string::npos);
  CHECK(seconds_since(started) < 10);
}

TEST_CASE("odd frame sizes are encoded (rounded to even), tiny ones are refused up front") {
  const auto out = path("odd.mp4");
  auto r = run_command(app("--input test --set input.width=641 --set input.height=479 --set input.max_frames=10 --output '" + out + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  int w = 0, h = 0;
  CHECK(count_frames(out, &w, &h) == 10);
  CHECK((w == 640 && h == 478));
  const auto tiny = path("tiny.mp4");
  r = run_command(app("--input test --set input.width=2 --set input.height=2 --output '" + tiny + "'"));
  CHECK(r.code == 78);
  CHECK(r.output.find("too small") != std::string::npos);
  CHECK(!fs::exists(tiny));
  CHECK(!fs::exists(tiny + ".partial"));
}

TEST_CASE("a stream whose frame size changes is written at its first size, every frame, not garbled") {
  // Two raw H.264 streams joined: 320x240 then 640x480.
  const auto a = path("part-a.h264"), b = path("part-b.h264"), joined = path("joined.h264");
  for (const auto& [file, w, h] : {std::tuple{a, 320, 240}, {b, 640, 480}}) {
    const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=15 ! video/x-raw,width=" + std::to_string(w) +
                               ",height=" + std::to_string(h) + ",framerate=15/1,format=I420 ! x264enc ! "
                               "video/x-h264,stream-format=byte-stream ! filesink location='" + file + "'");
    REQUIRE(r.code == 0);
  }
  std::ofstream(joined, std::ios::binary) << slurp(a) << slurp(b);
  const auto out = path("joined.mp4");
  const auto r = run_command(app("--input '" + joined + "' --output '" + out + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  int w = 0, h = 0;
  CHECK(count_frames(out, &w, &h) == 30);
  CHECK((w == 320 && h == 240));
}

TEST_CASE("bad inputs end quickly with a clear message and the documented exit code") {
  const auto empty = path("empty.mp4"), noise = path("noise.mp4"), truncated = path("truncated.mp4"), audio = path("audio.mp4");
  std::ofstream(empty).close();
  {
    std::ofstream out(noise, std::ios::binary);
    for (int i = 0; i < 200000; ++i) out.put(char(vc::test::rng()() & 0xff));
  }
  {
    const auto whole = slurp(make_video("whole.mp4", 50));
    std::ofstream(truncated, std::ios::binary) << whole.substr(0, whole.size() / 2);
  }
  REQUIRE(run_command("gst-launch-1.0 -q audiotestsrc num-buffers=50 ! wavenc ! filesink location='" + audio + "'").code == 0);
  const auto jpeg_like = path("random.jpg");
  {
    std::ofstream out(jpeg_like, std::ios::binary);
    out << "\xff\xd8\xff\xe0";
    for (int i = 0; i < 5000; ++i) out.put(char(vc::test::rng()() & 0xff));
  }
  struct Case {
    std::string input;
    int code;
    const char* says;
  };
  for (const auto& c : {Case{empty, 65, "empty"}, Case{noise, 65, "Could not determine type"}, Case{truncated, 65, "playable"},
                        Case{audio, 65, "no video stream"}, Case{path("missing.mp4"), 66, "no such file"},
                        Case{"/dev/video97", 66, "no such camera"}, Case{path("no-images/*.jpg"), 66, "no images"},
                        Case{jpeg_like, 65, "could not be decoded"}, Case{"test:nosuchpattern", 78, "not a test pattern"}}) {
    CAPTURE(c.input);
    const auto started = std::chrono::steady_clock::now();
    const auto r = run_command(app("--input '" + c.input + "' --output none"));
    CAPTURE(r.output);
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.says) != std::string::npos);
    CHECK(seconds_since(started) < 10);
    CHECK(r.output.find("GLib-GObject") == std::string::npos);  // no library noise in front of the message
  }
}

TEST_CASE("user text is never pipeline text: a pattern that smuggles elements is rejected, nothing is written") {
  const auto injected = path("injected.raw");
  const auto r = run_command(app("--input 'test:ball ! tee name=t ! queue ! filesink location=" + injected + " t.' --output none"));
  CHECK(r.code == 78);
  CHECK(!fs::exists(injected));
}

TEST_CASE("an output that cannot be created is a clear error (73)") {
  const auto r = run_command(app("--input test --set input.max_frames=5 --output /proc/forbidden/out.mp4"));
  CHECK(r.code == 73);
  CHECK(r.output.find("/proc/forbidden") != std::string::npos);
}

TEST_CASE("the overlay: a marked headline, no duplicate of it, bars in proportion, scaled to small frames") {
  cv::Mat image(480, 640, CV_8UC3, cv::Scalar(255, 255, 255));  // a bright frame
  config::Overlay style;
  style.position = config::Corner::BottomRight;
  style.bar_color = {0, 0, 255};  // pure blue bars (BGR 255, 0, 0)
  style.background_alpha = 1.0;
  OverlayContent content;
  content.top = {{3, 0.75f, "cat"}, {5, 0.25f, "dog"}};
  content.headline = "cat";
  content.headline_score = 0.7f;
  content.headline_kind = "smoothed over ~5 frames";
  content.fps = 29.97;
  content.latency_ms = 12.5;
  content.stream = "cam1";
  content.timestamp = pipeline::format_timestamp(62'345'000'000);
  CHECK(content.timestamp == "00:01:02.345");
  const auto panel = draw_overlay(image, content, style).panel;
  REQUIRE(panel.area() > 0);
  CHECK(panel.x + panel.width > 600);   // right edge
  CHECK(panel.y + panel.height > 440);  // bottom edge
  CHECK(image.at<cv::Vec3b>(5, 5) == cv::Vec3b(255, 255, 255));  // outside the panel: untouched
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
  CHECK(black > panel.area() / 3);
  // The 75% bar is three times the 25% bar: count blue pixels per row and compare the two bars' widths.
  std::vector<int> widths;
  for (int y = panel.y; y < panel.y + panel.height; ++y) {
    int w = 0;
    for (int x = panel.x; x < panel.x + panel.width; ++x) w += image.at<cv::Vec3b>(y, x) == cv::Vec3b(255, 0, 0);
    if (w > 0 && (widths.empty() || std::abs(widths.back() - w) > 2)) widths.push_back(w);
  }
  REQUIRE(widths.size() == 2);
  CHECK(double(widths[0]) / widths[1] == doctest::Approx(3.0).epsilon(0.1));

  // On a 320x240 frame the panel stays within about half the frame.
  cv::Mat small(240, 320, CV_8UC3, cv::Scalar(255, 255, 255));
  const auto p2 = draw_overlay(small, content, style).panel;
  CHECK(p2.width <= 320 * 0.5);
  CHECK(p2.height <= 240 * 0.65);

  config::Overlay off = style;
  off.enabled = false;
  cv::Mat untouched(100, 100, CV_8UC3, cv::Scalar(1, 2, 3));
  CHECK(draw_overlay(untouched, content, off).panel.area() == 0);
  CHECK(untouched.at<cv::Vec3b>(50, 50) == cv::Vec3b(1, 2, 3));
}

TEST_CASE("the overlay's text grows with the frame and never falls below a legible size; a small frame shows fewer lines") {
  OverlayContent content;
  content.top = {{3, 0.75f, "cat"}, {5, 0.2f, "dog"}, {6, 0.05f, "fox"}};
  content.headline = "cat";
  content.headline_score = 0.75f;
  content.headline_kind = "this frame";
  content.stable = "dog";
  content.stable_kind = "over the last ~5 frames";
  content.fps = 30;
  content.latency_ms = 12.5;
  content.stream = "door";
  content.source = "rtsp://cam/stream";
  content.timestamp = pipeline::format_timestamp(1'000'000'000);
  content.engine = "cuDNN";
  content.model = "resnet50";
  config::Overlay style;
  int previous_px = 0;
  for (const auto& [w, h] : {std::pair{320, 240}, std::pair{640, 480}, std::pair{1280, 720}, std::pair{1920, 1080}}) {
    CAPTURE(w);
    cv::Mat image(h, w, CV_8UC3, cv::Scalar(40, 160, 90));
    const auto drawn = draw_overlay(image, content, style);
    CHECK(drawn.headline_px >= 13);            // legible on 320x240 (it was about 7: "mush")
    CHECK(drawn.headline_px >= previous_px);   // and larger with the frame
    CHECK(drawn.headline_px <= h / 12);        // never a banner
    CHECK(drawn.panel.width <= w * 0.45 + 1);
    CHECK(drawn.panel.height <= h * 0.6 + 1);
    previous_px = drawn.headline_px;
    if (w == 320) CHECK(drawn.lines < 9);   // fewer lines on the small frame...
    if (w == 1920) CHECK(drawn.lines == 9); // ...all of them on a large one
  }
}

TEST_CASE("the headline is what the eye checks against the list: this frame's top-1, the smoothed label marked stable") {
  // At a cut from a coat to a dress the smoothed label still says coat: the headline must not (it did: "Coat 59 %"
  // over a dress while the list said "Dress 87.7 %").
  pipeline::OverlayMaker maker{config::Overlay{}, 5, "CPU reference", "resnet18"};
  pipeline::StreamStats stats;
  stats.name = "cam";
  stats.source = "clip.mp4";
  pipeline::FrameResult r;
  r.stream_name = "cam";
  r.source = "clip.mp4";
  r.top = {{3, 0.877f, "Dress"}, {4, 0.016f, "Coat"}};
  r.smoothed = {4, 0.59f, "Coat"};
  auto c = maker.make(r, stats, 1'000'000'000);
  CHECK(c.headline == "Dress");
  CHECK(c.headline_score == doctest::Approx(0.877f));
  CHECK(c.headline_kind == "this frame");
  CHECK(c.stable == "Coat");  // shown as what it is, beside, not as the headline
  CHECK(c.stable_kind == "over the last ~5 frames");  // (not "stable": it lags behind the frame)
  REQUIRE(c.top.size() == 1);
  CHECK(c.top[0].label == "Coat");  // the runners-up: the headline is not repeated
  CHECK(c.timestamp == "00:00:01.000");
  r.smoothed = {3, 0.8f, "Dress"};  // once the smoothing agrees, nothing more is shown
  CHECK(maker.make(r, stats, 0).stable.empty());
  // A still image: no frame rate, no timeline.
  r.source = "photos/shoe.png";
  r.smoothed = {};
  r.still_image = true;
  c = maker.make(r, stats, 100'000'000);
  CHECK(c.headline_kind == "this image");
  CHECK(c.fps < 0);
  CHECK(c.timestamp.empty());
  cv::Mat image(480, 640, CV_8UC3, cv::Scalar(255, 255, 255));
  config::Overlay style;
  style.bar_color = {0, 0, 255};
  style.background_alpha = 1.0;
  c.top = {{1, 0.9f, "Sneaker"}, {2, 0.004f, "Sandal"}};  // a 0.4 % score: no sliver of a bar
  const auto panel = draw_overlay(image, c, style).panel;
  int bar_rows = 0;
  for (int y = panel.y; y < panel.y + panel.height; ++y) {
    bool blue = false;
    for (int x = panel.x; x < panel.x + panel.width; ++x) blue |= image.at<cv::Vec3b>(y, x) == cv::Vec3b(255, 0, 0);
    bar_rows += blue;
  }
  CHECK(bar_rows > 0);
  CHECK(bar_rows <= 12);  // one bar's height, not two
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
    out << R"({"frame":0,"top":[{"label":"cat","index":0,"score":0.9}],"smoothed":{"label":"cat"}})" << "\n"
        << R"({"event":"label_change","frame":0,"from":null,"to":"cat"})" << "\n"
        << R"({"frame":1,"top":[{"label":"dog","index":1,"score":0.8}],"smoothed":{"label":"cat"}})" << "\n"
        << R"({"frame":2,"top":[{"label":"cat","index":0,"score":0.7}],"smoothed":{"label":"cat"}})" << "\n";
    std::ofstream(truth) << "0\tcat\n1\tcat\n2\tcat\n3\tdog\n";
  }
  const std::string eval = "'" + std::string(VC_APP_BINARY) + "' evaluate --results ";
  auto r = run_command(eval + "'" + results + "' --ground-truth '" + truth + "'");
  CHECK(r.code == 0);
  CHECK(r.output.find("frame accuracy: 66.67% (2/3)") != std::string::npos);
  CHECK(r.output.find("1 in the ground truth without a result") != std::string::npos);
  CHECK(r.output.find("top-1") != std::string::npos);
  r = run_command(eval + "'" + results + "' --ground-truth '" + truth + "' --smoothed");
  CHECK(r.output.find("frame accuracy: 100.00% (3/3)") != std::string::npos);
  r = run_command(eval + "'" + results + "' --ground-truth '" + results + "'");
  CHECK(r.output.find("frame accuracy: 100.00% (3/3)") != std::string::npos);
  std::ofstream(truth) << "zero\tcat\n";
  CHECK(run_command(eval + "'" + results + "' --ground-truth '" + truth + "'").code == 65);
  CHECK(run_command(eval + "/nonexistent.jsonl --ground-truth '" + truth + "'").code == 66);
  std::ofstream(results) << R"({"frame":"x","top":[{"label":"cat"}]})" << "\n";  // wrongly typed: a data error
  std::ofstream(truth) << "0\tcat\n";
  r = run_command(eval + "'" + results + "' --ground-truth '" + truth + "'");
  CHECK(r.code == 65);
  CHECK(r.output.find(":1:") != std::string::npos);
}

TEST_SUITE_END();
