// The video outputs: the RTSP server's teardown and its bounded client queues; the queues in front of the outputs
// (a live stream never evicts another stream's frame); a slow file output that holds back only its own stream.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <gst/gst.h>
#include <sys/stat.h>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/fake_classifier.hpp"
#include "pipeline/outputs/output_queue.hpp"
#include "pipeline/outputs/video_output.hpp"
#include "pipeline/runner.hpp"
#include "pipeline/snapshots.hpp"
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

TEST_CASE("RTSP clients that join late get the frames as they come, over TCP and UDP") {
  // The app serves a live pattern (15 fps); clients (the app itself) join 1, 5 and 15 s later, over TCP and over UDP,
  // and each takes 45 frames. A frame stamped with the source's time looked seconds in the future to a client that
  // joined late: it got 44 frames in 10 s joining after 1 s, 5 after 15 s, and nothing over UDP.
  const auto port = free_port(23000);
  const auto dir = path("rtsp-late");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string clients;
  for (const int delay : {1, 5, 15}) {
    for (const char* scheme : {"rtspt", "rtspu"}) {  // (rtspsrc: rtspt = TCP only, rtspu = UDP only)
      const auto name = fmt::format("{}-{}", scheme, delay);
      clients += fmt::format("(sleep {}; {} --set output.results='{}/{}.jsonl' >'{}/{}.log' 2>&1; echo $? >'{}/{}.rc') & "
                             "pids=\"$pids $!\"; ",
                             delay, app(fmt::format("--input {}://127.0.0.1:{}/live --set input.max_frames=45 --output none",
                                                    scheme, port), 30),
                             dir, name, dir, name, dir, name);
    }
  }
  const auto r = run_command("(exec " + app_direct("--input test:ball --set input.fps=15 --set input.width=160 --set "
                                                   "input.height=120 --output rtsp://127.0.0.1:" + port + "/live") +
                             " >'" + dir + "/server.log' 2>&1) & server=$!; sleep 0.5; " + clients +
                             "wait $pids; kill -INT $server; wait $server");
  for (const int delay : {1, 5, 15}) {
    for (const char* scheme : {"rtspt", "rtspu"}) {
      const auto name = fmt::format("{}-{}", scheme, delay);
      CAPTURE(name);
      CHECK_MESSAGE(slurp(dir + "/" + name + ".rc") == "0\n", slurp(dir + "/" + name + ".log"));
      // 45 frames over the span their own timestamps cover: at least 90 % of what the server sent meanwhile.
      std::vector<double> pts;
      for (const auto& j : read_jsonl(dir + "/" + name + ".jsonl")) {
        if (j.contains("top")) pts.push_back(j["pts"].get<double>());
      }
      REQUIRE(pts.size() == 45);
      const double sent = (pts.back() - pts.front()) * 15 + 1;
      CHECK(double(pts.size()) >= 0.9 * sent);
    }
  }
}

TEST_CASE("an output queue shared by streams: a live stream drops only its own oldest frame, a file's never") {
  pipeline::OutputQueue<int> q(2);
  CHECK(q.push(0, false, 100) == 0);  // the file (stream 0)
  CHECK(q.push(1, true, 200) == 0);   // the camera (stream 1)
  CHECK(q.push(1, true, 201) == 0);
  CHECK(q.push(1, true, 202) == 1);   // the camera is behind: its own oldest (200) goes
  for (int i = 1; i < 5; ++i) CHECK(q.push(0, false, 100 + i) == 0);  // the file's frames are never dropped
  CHECK(q.queued(0) == 5);
  CHECK(q.queued(1) == 2);
  std::vector<std::pair<int, int>> order;
  q.close();
  while (auto item = q.pop(std::chrono::milliseconds(0))) order.push_back(*item);
  CHECK(order == std::vector<std::pair<int, int>>{{0, 100}, {1, 201}, {1, 202}, {0, 101}, {0, 102}, {0, 103}, {0, 104}});
  CHECK(q.closed_and_empty());
}

TEST_CASE("a stream taken against credits waits when they run out, and goes on as they come back") {
  pipeline::FrameHub hub({{8, false}, {8, true}});
  hub.set_credits(0, 2);
  for (int i = 0; i < 4; ++i) {
    pipeline::Frame f;
    f.stream = 0;
    f.index = i;
    REQUIRE(hub.push(f));
    f.stream = 1;
    REQUIRE(hub.push(f));
  }
  auto b = hub.pop_batch(8, std::chrono::microseconds(0));
  CHECK(b.size() == 6);  // two of stream 0 (its credits), all four of stream 1
  CHECK(hub.queued(0) == 2);
  CHECK(hub.pop_batch(8, std::chrono::microseconds(0), std::chrono::milliseconds(1)).empty());  // none left to take
  hub.give_back(0);
  b = hub.pop_batch(8, std::chrono::microseconds(0));
  REQUIRE(b.size() == 1);
  CHECK((b[0].stream == 0 && b[0].index == 2));
}

TEST_CASE("a file output that cannot keep up holds back only its own stream: a live camera beside it loses nothing") {
  // The file's video goes into a pipe nobody reads (4 KiB of room): its output stops after a frame or two. Before,
  // that blocked post-processing, then the engine, and the camera dropped frames while it lasted.
  const auto dir = path("slow-output");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto clip = make_video("slow-output-clip.mp4", 300, 160, 120);
  const auto fifo = dir + "/clip.mkv.partial";  // where the output starts its file
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so that the output can open it for writing
  REQUIRE(reader >= 0);
  ::fcntl(reader, F_SETPIPE_SZ, 4096);
  auto c = config::parse_config("inputs:\n"
                                "  - {name: cam, kind: test, pattern: ball, width: 64, height: 48, fps: 10, max_frames: 20}\n"
                                "  - {name: clip, kind: file, path: '" + clip + "'}\n"
                                "output: {kind: file, path: '" + dir + "/{stream}.mkv', results: '" + dir + "/r.jsonl'}\n");
  config::validate(c);
  pipeline::Runner runner(c, std::make_unique<FakeClassifier>(2, 4));
  std::atomic<int> stop{0};
  pipeline::RunSummary summary;
  std::thread run([&] { summary = runner.run(stop); });
  // The camera runs its 20 frames (2 s) while the clip's output is stuck.
  const auto streams = runner.control().streams();
  wait_until([&] { return streams[0]->state == pipeline::StreamState::Ended; });
  CHECK(streams[0]->queue_dropped == 0);
  CHECK(streams[1]->classified < 300);  // the clip was held back meanwhile (x264 takes a few dozen frames in first)
  // Now read the pipe: the clip goes on and finishes.
  std::thread drain([reader] {
    ::fcntl(reader, F_SETFL, 0);
    char buffer[65536];
    while (::read(reader, buffer, sizeof buffer) > 0) {
    }
  });
  run.join();
  drain.join();
  ::close(reader);
  REQUIRE(summary.code == ExitCode::kOk);
  CHECK(summary.streams[0].frames == 20);
  CHECK(summary.streams[0].dropped == 0);
  CHECK(summary.streams[1].frames == 300);
  CHECK(summary.streams[1].dropped == 0);
}

TEST_CASE("a stream's snapshot is kept at a few widths only, however many a client asks for") {
  // A grey 320x240 frame, handed over by "the post stage" (a thread) when a request asks for one.
  std::vector<uint8_t> pixels(320 * 240 * 3, 128);
  auto frame = std::make_shared<pipeline::Frame>();
  frame->view.format = inference::PixelFormat::BGR;
  frame->view.width = 320;
  frame->view.height = 240;
  frame->view.planes[0] = pixels.data();
  frame->view.strides[0] = 320 * 3;
  pipeline::FrameResult result;
  result.stream = 0;
  result.top = {inference::Prediction{0, 0.9f, "class-0"}};
  pipeline::StreamStats stats;
  stats.name = "a";
  pipeline::Snapshots snapshots(1, std::chrono::minutes(1), {config::Overlay{}, 1, "CPU", "test"});
  std::atomic<bool> done{false};
  std::thread post([&] {
    while (!done) {
      if ((*snapshots.wanted())[0]) snapshots.take(frame, result);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  REQUIRE(snapshots.jpeg(0, stats, 0, std::chrono::seconds(10)).has_value());
  done = true;
  post.join();
  for (int width = 100; width < 300; width += 2) {  // the same picture (made at most once a minute), 100 widths
    const auto shot = snapshots.jpeg(0, stats, width, std::chrono::milliseconds(0));
    REQUIRE(shot.has_value());
    CHECK(shot->jpeg.size() > 100);
    CHECK(snapshots.widths_kept(0) <= 4);
  }
}

TEST_SUITE_END();
