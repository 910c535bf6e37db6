// Faults, each as a user or an operator would meet it, with the behaviour docs/RELIABILITY.md promises: nothing
// lost with exit 0, outputs finalized, live sources that recover, fast and clear failures, user errors that are
// never "internal".
#include <doctest/doctest.h>
#include <signal.h>

#include <cstring>
#include <limits>
#include <thread>

#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("faults");

namespace {

// A port for a test server: distinct per test process and call.
std::string free_port() { return vc::test::free_port(21000); }

bool whole_lines(const std::string& file) {
  const auto text = slurp(file);
  if (text.empty() || text.back() != '\n') return false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!nlohmann::json::accept(line)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("an output that is the input is refused and the input survives") {
  const auto src = make_video("precious.mp4", 30);
  const auto before = slurp(src);
  auto r = run_command(app("--input '" + src + "' --output '" + src + "'"));
  CHECK(r.code == 64);
  CHECK(r.output.find("refusing to overwrite") != std::string::npos);
  r = run_command(app("--input '" + src + "' --output none --set output.results='" + src + "'"));
  CHECK(r.code == 64);
  CHECK(slurp(src) == before);
}

TEST_CASE("results that cannot be written end the run with 74, never 0") {
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(app("--input test --set input.max_frames=300 --output none --set output.results=/dev/full"));
  CHECK(r.code == 74);
  CHECK(r.output.find("/dev/full") != std::string::npos);
  CHECK(r.output.find("No space left") != std::string::npos);
  CHECK(seconds_since(started) < 10);  // it stops at the first lost line, not at the end of the input
}

TEST_CASE("a video output whose disk fills while the encoder is behind: exit 74 within seconds, the disk named") {
  // Four 1080p noise streams into one mosaic: x264 is the slow stage, so the output's queue is full when the file
  // write fails. A full disk: every write to /dev/full fails with ENOSPC.
  const auto out = path("full-disk.mkv");
  fs::remove(out);
  fs::remove(out + ".partial");
  fs::create_symlink("/dev/full", out + ".partial");  // where the file is started
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(app("--input test:snow --input test:snow --input test:snow --input test:snow "
                                 "--set input.width=1920 --set input.height=1080 --set output.tiled=true --output '" +
                                 out + "'", 40));
  fs::remove(out + ".partial");
  CHECK_MESSAGE(r.code == 74, r.output);
  CHECK(r.output.find("the disk is full") != std::string::npos);
  CHECK(r.output.find(out) != std::string::npos);
  CHECK(seconds_since(started) < 15);
}

TEST_CASE("a reader that closes the pipe: exit 74, and the video is still finalized") {
  const auto out = path("sigpipe.mp4");
  const auto r = run_command("((" + app("--input test --set input.fps=30 --set input.max_frames=600 --output '" + out +
                                        "' --set output.results=-") + "; echo \"app-exit=$?\" >&2) | head -n 2 >/dev/null)");
  CHECK(r.output.find("app-exit=74") != std::string::npos);
  CHECK(count_frames(out) > 0);  // the MP4 got its index
}

TEST_CASE("SIGTERM and SIGHUP finalize the outputs like Ctrl-C") {
  for (const char* sig : {"TERM", "HUP", "INT"}) {
    CAPTURE(sig);
    const auto out = path(std::string("signal-") + sig + ".mp4"), jsonl = path(std::string("signal-") + sig + ".jsonl");
    const auto started = std::chrono::steady_clock::now();
    const auto r = run_command("(" + app("--input test --output '" + out + "' --set output.results='" + jsonl + "'") +
                               ") & pid=$!; sleep 1.5; kill -" + sig + " $pid; wait $pid");
    CHECK_MESSAGE(r.code == 0, r.output);
    CHECK(seconds_since(started) < 10);
    CHECK(count_frames(out) > 5);
    CHECK(whole_lines(jsonl));
    CHECK(!fs::exists(out + ".partial"));
  }
}

TEST_CASE("a second Ctrl-C quits at once, and the results file still ends with a whole line") {
  const auto out = path("double.mp4"), jsonl = path("double.jsonl");
  // 720p at 60 fps: the encoder still holds frames when the second Ctrl-C comes, so finishing is cut short.
  const auto r = run_command(app_direct("--input test --set input.fps=60 --set input.width=1280 --set input.height=720 --output '" +
                                        out + "' --set output.results='" + jsonl + "'") +
                             " & pid=$!; sleep 2; kill -INT $pid; sleep 0.01; kill -INT $pid; wait $pid");
  CHECK(r.code == 130);
  CHECK(whole_lines(jsonl));
  CHECK(!fs::exists(out));  // an unfinished MP4 keeps its .partial name: no broken file under the real name
}

TEST_CASE("MKV and fragmented MP4 recordings stay playable when the process is killed") {
  for (const auto& [name, extra] : {std::pair{"killed.mkv", ""}, {"killed.mp4", "--set output.fragment_s=0.5"}}) {
    CAPTURE(name);
    const auto out = path(name);
    run_command(app_direct("--input test --set input.fps=30 --output '" + out + "' " + extra) +
                " & pid=$!; sleep 3; kill -KILL $pid; wait $pid");
    CHECK(fs::exists(out));
    CHECK(count_frames(out) > 10);
  }
}

TEST_CASE("a file yielding far fewer frames than it holds fails (65), naming the counts") {
  const auto whole = slurp(make_video("long.mkv", 100, 160, 120, 25, "matroskamux"));
  const auto cut = path("cut.mkv");
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() * 3 / 10);
  const auto r = run_command(app("--input '" + cut + "' --output none"));
  CHECK(r.code == 65);
  CHECK(r.output.find("decoded only") != std::string::npos);
  CHECK(r.output.find("of the 100 frames") != std::string::npos);
}

namespace {

// `clip` with blocks of random bytes written over its frames (not its index: mp4mux puts it last), at places a
// seeded generator picks (the same every run).
std::string damage(const std::string& clip, const std::string& name, bool every_other_block) {
  auto data = slurp(clip);
  std::mt19937 rng(7);
  const size_t block = 4096, index = data.rfind("moov"), n = index == std::string::npos ? data.size() : index - 8;
  auto scribble = [&](size_t at) {
    for (size_t i = at; i < std::min(at + block, n); ++i) data[i] = char(rng() & 0xff);
  };
  if (every_other_block) {
    for (size_t at = n * 15 / 100 / block * block, k = 0; at < n * 90 / 100; at += block, ++k) {
      if (k % 2 == 0) scribble(at);
    }
  } else {
    for (int i = 0; i < 5; ++i) scribble(n / 10 + rng() % (n - n / 10 - block));
  }
  const auto out = path(name);
  std::ofstream(out, std::ios::binary) << data;
  return out;
}

}  // namespace

TEST_CASE("a damaged file is never 'ok': frames lost and frames decoded from damage counted, flagged, exit 65") {
  const auto clean = make_video("to-damage.mp4", 300);
  for (const bool alternate : {false, true}) {
    CAPTURE(alternate);
    const auto file = damage(clean, alternate ? "damaged-alternate.mp4" : "damaged-5-blocks.mp4", alternate);
    const auto jsonl = path(alternate ? "damaged-alternate.jsonl" : "damaged-5-blocks.jsonl");
    auto r = run_command(app("--input '" + file + "' --output none --set output.results='" + jsonl + "'"));
    CHECK(r.code == 65);
    CHECK(r.output.find("the file is damaged") != std::string::npos);
    CHECK(std::regex_search(r.output, std::regex(R"(\d+ of the \d+ frames the decoder was given could not be decoded)")));
    int flagged = 0;
    for (const auto& j : read_jsonl(jsonl)) flagged += j.contains("top") && j.value("damaged", false);
    CHECK(flagged > 0);  // the frames decoded from damaged data say so
    CHECK(frame_lines(jsonl) < 300);  // every frame that could be decoded was classified
    // Accepted damage: exit 0, and still said.
    r = run_command(app("--input '" + file + "' --output none --set input.on_damage=warn --log-level info"));
    CHECK(r.code == 0);
    CHECK(r.output.find("the file is damaged") != std::string::npos);
    CHECK(std::regex_search(r.output, std::regex(R"(\d+ lost \(undecodable\), \d+ damaged)")));
  }
  // The clean file: nothing said.
  const auto r = run_command(app("--input '" + clean + "' --output none"));
  CHECK(r.code == 0);
  CHECK(r.output.find("damaged") == std::string::npos);
}

TEST_CASE("damage in pictures that carry their stream headers is counted too: the last picture, an all-intra file") {
  // x264 repeats SPS/PPS in every keyframe, and h264parse flags such a picture HEADER: a keyframe is still a picture.
  // (Both files gave "ok", 297/300 and 52/60 frames, exit 0, while header-flagged pictures went uncounted.)
  const auto last = make_video("last-scrambled-src.mp4", 300);
  auto data = slurp(last);
  const size_t moov = data.rfind("moov"), stsz = data.find("stsz", moov);
  REQUIRE(moov != std::string::npos);
  REQUIRE(stsz != std::string::npos);
  const auto be32 = [&](size_t at) {
    return uint32_t(uint8_t(data[at])) << 24 | uint32_t(uint8_t(data[at + 1])) << 16 | uint32_t(uint8_t(data[at + 2])) << 8 |
           uint32_t(uint8_t(data[at + 3]));
  };
  // The last sample (mp4mux writes the samples in order, then moov): all of it but its NAL length prefix.
  const uint32_t samples = be32(stsz + 12), last_size = be32(stsz + 16 + 4 * (samples - 1));
  REQUIRE(samples == 300);
  std::mt19937 rng(11);
  for (size_t i = moov - 4 - last_size + 4; i < moov - 4; ++i) data[i] = char(rng() & 0xff);
  const auto last_file = path("last-scrambled.mp4");
  std::ofstream(last_file, std::ios::binary) << data;

  const auto intra = path("all-intra-src.mp4");
  const auto made = run_command("gst-launch-1.0 -q videotestsrc num-buffers=60 pattern=ball ! video/x-raw,width=320,"
                                "height=240,framerate=25/1 ! videoconvert ! video/x-raw,format=I420 ! x264enc "
                                "key-int-max=1 ! h264parse ! mp4mux ! filesink location='" + intra + "'");
  REQUIRE_MESSAGE(made.code == 0, made.output);
  const auto intra_file = damage(intra, "all-intra-scrambled.mp4", false);

  for (const auto& [file, frames] : {std::pair{last_file, 300}, std::pair{intra_file, 60}}) {
    CAPTURE(file);
    const auto jsonl = file + ".jsonl";
    const auto r = run_command(app("--input '" + file + "' --output none --set output.results='" + jsonl + "'"));
    CHECK_MESSAGE(r.code == 65, r.output);
    CHECK(r.output.find("the file is damaged") != std::string::npos);
    std::smatch m;
    static const std::regex lost(R"((\d+) of the (\d+) frames the decoder was given could not be decoded)");
    if (std::regex_search(r.output, m, lost)) {
      // Every picture given to the decoder is counted in (the parser may drop one it cannot read at all), and every
      // one that did not come out, as lost.
      CHECK(std::stoi(m[2]) >= frames - 2);
      CHECK(std::stoi(m[1]) == std::stoi(m[2]) - frame_lines(jsonl));
    } else {
      CHECK_MESSAGE(r.output.find("decoded from damaged data") != std::string::npos, r.output);
    }
  }
  // The same files undamaged: nothing lost, nothing said.
  for (const auto& clean : {last, intra}) {
    const auto r = run_command(app("--input '" + clean + "' --output none"));
    CHECK_MESSAGE(r.code == 0, r.output);
  }
}

TEST_CASE("corrupt weights (NaN) are refused before anything runs") {
  const auto path_nan = path("nan.safetensors");
  {
    auto bytes = slurp(fixture("basic_narrow.safetensors"));
    // Overwrite the first value of conv1.weight (found through the header) with a NaN of its dtype.
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    const auto meta = nlohmann::json::parse(bytes.substr(8, header));
    const auto& t = meta.at("conv1.weight");
    const size_t at = 8 + header + t["data_offsets"][0].get<size_t>();
    if (t["dtype"] == "F32") {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(bytes.data() + at, &nan, 4);
    } else {
      const uint16_t nan = 0x7e00;  // FP16 / BF16 quiet NaN bits differ; F16 is what the fixtures use otherwise
      std::memcpy(bytes.data() + at, &nan, 2);
    }
    std::ofstream(path_nan, std::ios::binary) << bytes;
  }
  const auto r = run_command("'" + std::string(VC_APP_BINARY) + "' --model '" + path_nan +
                             "' --set inference.device=cpu --input test --set input.max_frames=5 --output none");
  CHECK(r.code == 65);
  CHECK(r.output.find("tensor 'conv1.weight' holds NaN") != std::string::npos);
}

TEST_CASE("user errors get user exit codes, never 70") {
  const std::string bin = "'" + std::string(VC_APP_BINARY) + "' ";
  const auto yaml = path("listkey.yaml");
  std::ofstream(yaml) << "model:\n  ? [a, b]\n  : 3\n";
  const auto nonutf8_labels = path("labels-latin1.txt");
  {
    std::ofstream out(nonutf8_labels, std::ios::binary);
    for (int i = 0; i < 10; ++i) out << "caf\xe9 " << i << "\n";
  }
  struct Case {
    std::string args;
    int code;
    const char* says;
  };
  for (const auto& c : {Case{"--config '" + yaml + "' config", 78, "a key must be a name"},
                        Case{"--set 'inference.algorithms={[x]: 1}' config", 78, "a key must be a name"},
                        Case{"--input test --output rtsp://h:123456789012345678901/x config", 64, "out of range"},
                        Case{"--config /tmp config", 66, "is a directory"},
                        Case{"--input '' config", 64, "--input: empty"},
                        Case{"--input test --output '' config", 64, "--output: empty"},
                        Case{"--input test --output screen config", 64, "display"},
                        Case{"--set model.topk=3 config", 78, "did you mean model.top_k"},
                        Case{"--model /etc/hostname --input test --output none", 65, "not a safetensors file"},
                        Case{"", 64, "nothing to classify"}}) {
    CAPTURE(c.args);
    const auto r = run_command(bin + c.args);
    CAPTURE(r.output);
    CHECK(r.code == c.code);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
  auto r = run_command(app("--input test --set input.max_frames=3 --output none --set model.labels='" + nonutf8_labels + "'"));
  CHECK(r.code == 65);
  CHECK(r.output.find("UTF-8") != std::string::npos);
  // A file name that is not UTF-8: results are still valid JSON lines.
  const auto odd = path("odd-\xff-name.mp4");
  fs::copy_file(make_video("plain.mp4", 5), odd, fs::copy_options::overwrite_existing);
  const auto jsonl = path("odd.jsonl");
  r = run_command(app("--input '" + odd + "' --output none --set output.results='" + jsonl + "'"));
  CHECK(r.code == 0);
  CHECK(whole_lines(jsonl));
}

// An RTSP server: the app itself, serving a live test pattern.
struct RtspServer {
  std::string port = free_port();
  std::string url() const { return "rtsp://127.0.0.1:" + port + "/live"; }
  std::string start_command() const {
    return app_direct("--input test --set input.fps=15 --set input.width=160 --set input.height=120 --output rtsp://127.0.0.1:" +
                      port + "/live") + " >/dev/null 2>&1 & echo $! > '" + path("server-" + port + ".pid") + "'";
  }
  std::string pid() const { return "$(cat '" + path("server-" + port + ".pid") + "')"; }
};

TEST_CASE("an http(s) clip is a file: it ends, every frame classified, none dropped; a missing one names the status") {
  const auto clip = make_video("web-clip.mp4", 60);
  const auto port = free_port();
  const auto serve = "(cd '" + work_dir().string() + "' && exec python3 -m http.server " + port +
                     " --bind 127.0.0.1 >/dev/null 2>&1) & server=$!; for i in $(seq 50); do curl -s -o /dev/null "
                     "http://127.0.0.1:" + port + "/ && break; sleep 0.1; done; ";
  const auto jsonl = path("web-clip.jsonl");
  auto r = run_command(serve + app("--input http://127.0.0.1:" + port + "/web-clip.mp4 --output none --set output.results='" +
                                   jsonl + "' --log-level info") + "; rc=$?; kill $server; exit $rc");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(frame_lines(jsonl) == 60);  // every frame, none dropped, and it ended
  CHECK(std::regex_search(r.output, std::regex(R"(stream0\s+60\s+0\s)")));
  CHECK(r.output.find("restart") == std::string::npos);
  r = run_command(serve + app("--input http://127.0.0.1:" + port + "/no-such-clip.mp4 --output none") +
                  "; rc=$?; kill $server; exit $rc");
  CHECK(r.code == 66);
  CHECK(r.output.find("HTTP 404") != std::string::npos);
  // input.live: true makes it a live stream: at its end it is restarted, as a camera would be.
  const auto live_jsonl = path("web-clip-live.jsonl");
  r = run_command(serve + app("--input http://127.0.0.1:" + port + "/web-clip.mp4 --output none --set input.live=true "
                              "--set input.max_frames=100 --set input.reconnect.delay_s=0.1 --set output.results='" +
                              live_jsonl + "'") + "; rc=$?; kill $server; exit $rc");
  CHECK_MESSAGE(r.code == 0, r.output);
  int downs = 0;
  for (const auto& j : read_jsonl(live_jsonl)) downs += j.value("event", "") == "stream_down";
  CHECK(downs >= 1);
}

TEST_CASE("a source's first frame has input.start_timeout_s, not the stall timeout; 0 leaves the stall timeout") {
  // A UDP source nobody sends to: no first frame ever. Each of its two starts waits the start allowance (2 s) before it
  // counts as stalled, not the 1 s stall timeout meant for a source whose frames stop.
  const auto port = vc::test::free_port(26000);
  const auto started = std::chrono::steady_clock::now();
  auto r = run_command(app("--input udp://127.0.0.1:" + port + " --output none --set input.stall_timeout_s=1 "
                           "--set input.start_timeout_s=2 --set input.reconnect.attempts=1 --set input.reconnect.delay_s=0.1"));
  CHECK(r.code == 69);
  CHECK(r.output.find("no first frame 2 s after it started (stalled; input.start_timeout_s)") != std::string::npos);
  CHECK(seconds_since(started) >= 4.0);
  r = run_command(app("--input udp://127.0.0.1:" + port + " --output none --set input.stall_timeout_s=1 "
                      "--set input.start_timeout_s=0 --set input.reconnect.attempts=1 --set input.reconnect.delay_s=0.1"));
  CHECK(r.code == 69);
  CHECK(r.output.find("no first frame 1 s after it started") != std::string::npos);
}

TEST_CASE("RTSP: a server that stops comes back — stream_down, reconnect with backoff, stream_up") {
  RtspServer server;
  const auto jsonl = path("reconnect.jsonl");
  // Client: short stall timeout and backoff. Server: up 3 s, killed, back 2 s later; the client stops at 12 s.
  const std::string client = app("--input " + server.url() + " --output none --set output.results='" + jsonl + "' "
                                 "--set input.stall_timeout_s=3 --set input.reconnect.delay_s=0.5 --set input.reconnect.max_delay_s=1 --set input.reconnect.attempts=20", 60);
  const auto r = run_command(server.start_command() + "; sleep 2; (" + client + ") & c=$!; sleep 3; kill -KILL " + server.pid() +
                             "; sleep 2; " + server.start_command() + "; sleep 7; kill -INT $c; wait $c; rc=$?; kill -INT " +
                             server.pid() + "; exit $rc");
  CHECK_MESSAGE(r.code == 0, r.output);
  std::vector<std::string> events;
  int64_t after_up = 0;
  for (const auto& j : read_jsonl(jsonl)) {
    const std::string e = j.value("event", "");
    if (e == "stream_down" || e == "stream_up") events.push_back(e);
    if (j.contains("top") && !events.empty() && events.back() == "stream_up") ++after_up;
  }
  REQUIRE(events.size() >= 2);
  CHECK(events[0] == "stream_down");
  CHECK(events[1] == "stream_up");
  CHECK(after_up > 10);  // frames flow again after the restart
  CHECK(r.output.find("restart") != std::string::npos);
}

TEST_CASE("RTSP: a frozen server is caught by the stall watchdog; Ctrl-C during the stall acts at once") {
  RtspServer server;
  const auto jsonl = path("stall.jsonl");
  const std::string client = app("--input " + server.url() + " --output none --set output.results='" + jsonl + "' "
                                 "--set input.stall_timeout_s=3 --set input.reconnect.delay_s=0.5", 60);
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(server.start_command() + "; sleep 2; (" + client + ") & c=$!; sleep 3; kill -STOP " + server.pid() +
                             "; sleep 6; echo \"sent-at=$(date +%s.%N)\"; kill -INT $c; wait $c; rc=$?; echo \"stopped-at=$(date +%s.%N)\"; "
                             "kill -CONT " + server.pid() + "; kill -INT " + server.pid() + "; exit $rc");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(seconds_since(started) < 30);
  bool down = false;
  for (const auto& j : read_jsonl(jsonl)) down |= j.value("event", "") == "stream_down" && j.value("reason", "").find("stalled") != std::string::npos;
  CHECK(down);
  std::smatch sent, stopped;
  REQUIRE(std::regex_search(r.output, sent, std::regex(R"(sent-at=([0-9.]+))")));
  REQUIRE(std::regex_search(r.output, stopped, std::regex(R"(stopped-at=([0-9.]+))")));
  CHECK(std::stod(stopped[1]) - std::stod(sent[1]) < 1.5);
}

TEST_CASE("RTSP: a server that never comes back: the client gives up after its attempts, exit 69 (never 0)") {
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(app("--input rtsp://127.0.0.1:" + free_port() + "/none --output none "
                                 "--set input.reconnect.attempts=2 --set input.reconnect.delay_s=0.2"));
  CHECK(r.code == 69);
  CHECK(r.output.find("gave up after 2 restart(s)") != std::string::npos);
  CHECK(seconds_since(started) < 15);
}

TEST_SUITE_END();
