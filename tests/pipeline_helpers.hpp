// Shared by the end-to-end tests: a scratch folder, the app on the small fixture model with the CPU engine, test
// media made by GStreamer itself, and readers for what the app wrote.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/sources/stream.hpp"
#include "test_helpers.hpp"

namespace vc::test {

namespace fs = std::filesystem;

inline fs::path work_dir() {
  static const auto dir = [] {
    auto d = fs::temp_directory_path() / ("vc-e2e-" + std::to_string(getpid()));
    fs::create_directories(d);
    std::ofstream labels(d / "labels.txt");
    for (int i = 0; i < 10; ++i) labels << "class-" << i << "\n";
    return d;
  }();
  return dir;
}

inline std::string path(const std::string& name) { return (work_dir() / name).string(); }

// The app on the small fixture model with the CPU engine, plus `args`; `timeout` guards against hangs.
// --foreground: a signal sent to timeout reaches the app once (without it, timeout also signals its whole
// process group, and a second Ctrl-C means "quit at once").
inline std::string app(const std::string& args, int timeout_s = 60) {
  return "timeout --foreground " + std::to_string(timeout_s) + " '" + std::string(VC_APP_BINARY) + "' --model '" +
         fixture("basic_narrow.safetensors") + "' --set model.labels='" + (work_dir() / "labels.txt").string() +
         "' --set model.input_size=64 --set inference.device=cpu --set logging.level=warn " + args;
}

// The same without the timeout guard: for tests that signal the app's own process ($! is the app).
inline std::string app_direct(const std::string& args) {
  const std::string guarded = app(args);
  return guarded.substr(guarded.find('\''));
}

// A loopback port for a test server: distinct per test process and per call (base: a range per suite), below Linux's
// ephemeral range (32768-60999, where the tests' own client sockets get their ports: a server there could find its
// port taken by one of them), and free when it is chosen (bound and released; the server binds it again at once).
inline std::string free_port(int base) {
  static int next = 0;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = 20000 + (base + getpid() * 7 + next++ * 131) % 12000;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    if (free) return std::to_string(port);
  }
  return std::to_string(20000 + (base + getpid()) % 12000);
}

// Frames GStreamer decodes from a video file (through the app's own source).
inline int64_t count_frames(const std::string& file, int* width = nullptr, int* height = nullptr) {
  auto hub = std::make_shared<pipeline::FrameHub>(std::vector<pipeline::QueuePolicy>{{64, false}});
  auto stop = std::make_shared<std::atomic<bool>>(false);
  config::Input in;
  in.kind = config::InputKind::File;
  in.path = file;
  in.name = "count";
  int64_t n = 0;
  pipeline::Stream s(0, in, false, {hub, nullptr, nullptr, stop, nullptr, nullptr});
  s.start();
  for (;;) {
    auto batch = hub->pop_batch(64, std::chrono::microseconds(0));
    for (const auto& f : batch) {
      if (width) *width = f.view.width;
      if (height) *height = f.view.height;
    }
    n += int64_t(batch.size());
    if (batch.empty() && hub->all_done()) break;
  }
  s.join();
  return s.failure() ? -1 : n;
}

// gst-discoverer-1.0's duration in seconds, or -1.
inline double discovered_duration(const std::string& file) {
  const auto r = run_command("gst-discoverer-1.0 '" + file + "'");
  std::smatch m;
  static const std::regex duration(R"(Duration: (\d+):(\d+):(\d+\.\d+))");
  if (r.code != 0 || !std::regex_search(r.output, m, duration)) return -1;
  return std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]);
}

// Every line of a JSON-lines file, parsed (a line that is not JSON fails the test).
inline std::vector<nlohmann::json> read_jsonl(const std::string& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    INFO("line: " << line);
    nlohmann::json j;
    CHECK_NOTHROW(j = nlohmann::json::parse(line));
    lines.push_back(j);
  }
  return lines;
}

inline int64_t frame_lines(const std::string& jsonl, const std::string& stream = "") {
  int64_t n = 0;
  for (const auto& j : read_jsonl(jsonl)) n += j.contains("top") && (stream.empty() || j["stream"] == stream);
  return n;
}

// A small H.264 video made by GStreamer itself (x264, 4:2:0).
inline std::string make_video(const std::string& name, int frames, int width = 320, int height = 240, int fps = 25,
                              const std::string& mux = "mp4mux") {
  const auto file = path(name);
  const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=" + std::to_string(frames) +
                             " pattern=ball ! video/x-raw,width=" + std::to_string(width) + ",height=" +
                             std::to_string(height) + ",framerate=" + std::to_string(fps) +
                             "/1 ! videoconvert ! video/x-raw,format=I420 ! x264enc ! h264parse ! " + mux +
                             " ! filesink location='" + file + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  return file;
}

inline std::string slurp(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace vc::test
