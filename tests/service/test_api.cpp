// The REST API against a real run (the app on the CPU engine, driven with curl): streams added and removed while the
// others go on, outputs and results finalized on removal, the state file across a restart, SIGHUP reconciling the
// streams with the edited config file, and every error a client can get (400, 401, 403, 404, 409, 413, 422, 429,
// 503). The web page in a real browser: tests/service/web_page_test.py.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;
using json = nlohmann::json;

TEST_SUITE_BEGIN("api");

namespace {

constexpr const char* kToken = "test-token-0123";

struct Reply {
  int status = 0;
  std::string body;
  [[nodiscard]] json parsed() const { return json::parse(body, nullptr, false); }
};

// The app as a service in the background: started with a config file, waited for (/readyz), stopped with SIGINT.
class Service {
 public:
  explicit Service(const std::string& name) : dir_(path("api-" + name)), port_(free_port(43000)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/media");
    std::ofstream(dir_ + "/token") << kToken << "\n";
  }
  ~Service() {
    if (running_) (void)stop();
  }
  const std::string& dir() const { return dir_; }
  std::string url(const std::string& p) const { return "http://127.0.0.1:" + port_ + p; }

  // `yaml`: the config's own sections; the api and metrics sections are added.
  void write_config(const std::string& yaml, const std::string& api_extra = "", bool token = true) const {
    std::ofstream(dir_ + "/service.yaml") << "api:\n  enabled: true\n" << (token ? "  token_file: token\n" : "")
                                          << "  allowed_dirs: [media]\n  state_file: state.yaml\n" << api_extra
                                          << "metrics:\n  port: " << port_ << "\n" << yaml;
  }
  void start(const std::string& args = "--set logging.level=info") {
    const auto r = run_command("(" + app_direct("--config '" + dir_ + "/service.yaml' " + args) + " >>'" + dir_ +
                               "/app.log' 2>&1; echo $? >'" + dir_ + "/rc') & echo $! >'" + dir_ + "/pid'");
    REQUIRE(r.code == 0);
    fs::remove(dir_ + "/rc");
    running_ = true;
    // Ready: the engine is built and the configured streams started.
    for (int i = 0; i < 600 && get("/readyz").status != 200; ++i) {
      REQUIRE_MESSAGE(!fs::exists(dir_ + "/rc"), log());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE_MESSAGE(get("/readyz").status == 200, log());
  }
  // The app's process id (the subshell's child).
  std::string pid() const { return "$(pgrep -P $(cat '" + dir_ + "/pid'))"; }
  void signal(const std::string& sig) const { REQUIRE(run_command("kill -" + sig + " " + pid()).code == 0); }
  int stop() {
    running_ = false;
    (void)run_command("kill -INT " + pid());
    for (int i = 0; i < 600 && !fs::exists(dir_ + "/rc"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(dir_ + "/rc");
    int rc = -1;
    in >> rc;
    return rc;
  }
  std::string log() const {
    std::ifstream in(dir_ + "/app.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  Reply request(const std::string& method, const std::string& p, const std::string& body = "", const std::string& token = kToken,
                const std::string& extra = "") const {
    const auto body_file = dir_ + "/body.out";
    std::string cmd = "curl -s -o '" + body_file + "' -w '%{http_code}' -X " + method + " " + extra + " ";
    if (!token.empty()) cmd += "-H 'Authorization: Bearer " + token + "' ";
    if (!body.empty()) {
      std::ofstream(dir_ + "/body.in") << body;
      cmd += "-H 'Content-Type: application/json' --data-binary @'" + dir_ + "/body.in' ";
    }
    const auto r = run_command(cmd + "'" + url(p) + "'");
    Reply out;
    out.status = std::atoi(r.output.c_str());
    std::ifstream in(body_file);
    out.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return out;
  }
  Reply get(const std::string& p, const std::string& token = "") const { return request("GET", p, "", token); }
  Reply add(const json& input, const std::string& token = kToken) const {
    return request("POST", "/api/v1/streams", input.dump(), token);
  }
  Reply remove(const std::string& name, const std::string& token = kToken) const {
    return request("DELETE", "/api/v1/streams/" + name, "", token);
  }
  json stream(const std::string& name) const { return get("/api/v1/streams/" + name).parsed(); }
  int64_t frames(const std::string& name) const {
    const auto s = stream(name);
    return s.is_object() && s.contains("frames") ? s["frames"].get<int64_t>() : -1;
  }
  // "a,b": the streams the service shows, in order.
  std::string names() const {
    std::string out;
    const auto list = get("/api/v1/streams", kToken).parsed();  // (kept: a range over a temporary's member dangles)
    for (const auto& s : list["streams"]) {
      if (!out.empty()) out += ',';
      out += s["name"].get<std::string>();
    }
    return out;
  }
  // Waits (up to 60 s) until `stream` has classified more than `than` frames; returns its count.
  int64_t wait_frames(const std::string& name, int64_t than) const {
    int64_t n = -1;
    for (int i = 0; i < 600 && (n = frames(name)) <= than; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return n;
  }
  std::string file(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  std::string dir_, port_;
  bool running_ = false;
};

json last_line(const std::string& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return json::parse(last, nullptr, false);
}

}  // namespace

TEST_CASE("API: a stream added runs beside the others, one removed is finalized, and the state file keeps them") {
  Service svc("lifecycle");
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: ball, fps: 15}\noutput:\n  kind: file\n"
                   "  path: out/{stream}.mkv\n  results: out/{stream}.jsonl\n");
  svc.start();
  CHECK(svc.names() == "a");
  const int64_t a0 = svc.wait_frames("a", 0);

  // Added: it classifies, and a goes on meanwhile.
  const auto added = svc.add({{"name", "b"}, {"kind", "test"}, {"pattern", "smpte"}, {"fps", 15}});
  REQUIRE_MESSAGE(added.status == 201, added.body);
  CHECK(added.parsed()["name"] == "b");
  CHECK(svc.wait_frames("b", 5) > 5);
  const int64_t a1 = svc.frames("a");
  CHECK(a1 > a0);
  CHECK(svc.names() == "a,b");
  CHECK(svc.file("state.yaml").find("name: b") != std::string::npos);

  // Removed: its video is finalized (playable), its results end with its stream_end, before the answer comes.
  const auto removed = svc.remove("b");
  REQUIRE_MESSAGE(removed.status == 200, removed.body);
  CHECK(removed.parsed()["finalized"] == true);
  CHECK(discovered_duration(svc.dir() + "/out/b.mkv") > 0);
  const auto end = last_line(svc.dir() + "/out/b.jsonl");
  CHECK(end["event"] == "stream_end");
  CHECK(end["reason"] == "removed");
  CHECK(svc.names() == "a");
  CHECK(svc.file("state.yaml").find("name: b") == std::string::npos);
  CHECK(svc.wait_frames("a", a1) > a1);  // a never stopped

  // The same name again: a new stream, whose video does not replace the first one's.
  REQUIRE(svc.add({{"name", "b"}, {"kind", "test"}, {"pattern", "checkers-8"}}).status == 201);
  CHECK(svc.wait_frames("b", 0) > 0);
  CHECK(svc.remove("b").status == 200);
  CHECK(discovered_duration(svc.dir() + "/out/b-2.mkv") > 0);
  CHECK(discovered_duration(svc.dir() + "/out/b.mkv") > 0);

  REQUIRE(svc.add({{"name", "c"}, {"kind", "test"}, {"pattern", "smpte"}}).status == 201);
  CHECK(svc.wait_frames("c", 0) > 0);
  const int rc = svc.stop();
  CHECK_MESSAGE(rc == 0, svc.log());
  const auto summary = svc.log();
  CHECK(summary.find("removed") != std::string::npos);

  // A restart starts the streams as last changed (a, c), not the config's (a).
  svc.start();
  CHECK(svc.names() == "a,c");
  CHECK(svc.wait_frames("c", 0) > 0);
  CHECK(svc.log().find("2 stream(s) from") != std::string::npos);
  CHECK(svc.stop() == 0);
}

TEST_CASE("API: SIGHUP brings the streams in line with the edited config file, touching only what changed") {
  Service svc("sighup");
  const std::string unchanged = "  - {name: same, kind: test, pattern: smpte, fps: 10}\n";
  // A file that plays to its end before the SIGHUP: still named in the config, it is not started again.
  const std::string clip = "  - {name: clip, kind: file, path: '" + make_video("sighup-clip.mp4", 10) + "'}\n";
  svc.write_config("inputs:\n" + unchanged + "  - {name: gone, kind: test, pattern: ball}\n"
                   "  - {name: edited, kind: test, pattern: ball, fps: 10}\n" + clip + "output:\n  results: out/{stream}.jsonl\n");
  svc.start();
  const int64_t same0 = svc.wait_frames("same", 0);
  for (int i = 0; i < 300 && svc.stream("clip")["state"] != "ended"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(svc.stream("clip")["state"] == "ended");
  svc.write_config("inputs:\n" + unchanged + "  - {name: edited, kind: test, pattern: ball, fps: 5}\n" + clip +
                   "  - {name: new, kind: test, pattern: checkers-8}\noutput:\n  results: out/{stream}.jsonl\n");
  svc.signal("HUP");
  std::string log;
  for (int i = 0; i < 300 && (log = svc.log()).find("SIGHUP: streams added") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK_MESSAGE(log.find("SIGHUP: streams added: new; removed: gone; changed: edited") != std::string::npos, log);
  CHECK(svc.names() == "same,clip,edited,new");
  CHECK(svc.stream("clip")["state"] == "ended");
  CHECK(svc.wait_frames("new", 0) > 0);
  CHECK(last_line(svc.dir() + "/out/gone.jsonl")["reason"] == "removed");
  // The stream that did not change was not restarted: its count went on from where it was.
  CHECK(svc.frames("same") > same0);
  CHECK(svc.stream("same")["restarts"] == 0);
  CHECK(svc.file("out/same.jsonl").find("stream_end") == std::string::npos);
  CHECK(svc.file("state.yaml").find("fps: 5") != std::string::npos);
  CHECK(svc.stop() == 0);
}

TEST_CASE("API: every error a client can get, each with a JSON body that says why") {
  Service svc("errors");
  fs::create_directories(svc.dir() + "/elsewhere");
  std::ofstream(svc.dir() + "/elsewhere/x.mp4") << "not a video";
  fs::create_symlink(svc.dir() + "/elsewhere/x.mp4", svc.dir() + "/media/link.mp4");
  std::ofstream(svc.dir() + "/big.json") << json{{"name", "big"}, {"kind", "test"}, {"pattern", std::string(70000, 'x')}}.dump();
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: ball}\noutput:\n  results: out/{stream}.jsonl\n",
                   "  rate_per_s: 10000\n  protect_reads: true\n");
  svc.start();
  const json ok{{"name", "b"}, {"kind", "test"}};

  // Authentication: reads too (protect_reads).
  CHECK(svc.get("/api/v1/streams").status == 401);
  CHECK(svc.get("/api/v1/streams", "wrong").status == 403);
  CHECK(svc.get("/api/v1/streams", kToken).status == 200);
  CHECK(svc.add(ok, "").status == 401);
  CHECK(svc.add(ok, "wrong").status == 403);

  // Invalid entries: the config's own message and the key at fault.
  auto r = svc.add({{"name", "b"}, {"kind", "test"}, {"fps", -1}});
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "input.fps");
  CHECK(r.parsed()["error"].get<std::string>().find("out of range") != std::string::npos);
  r = svc.add({{"name", "b"}, {"kind", "test"}, {"fpss", 1}});
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "input.fpss");
  r = svc.add({{"kind", "test"}});
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "input.name");
  r = svc.add({{"name", "../x"}, {"kind", "test"}});
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "input.name");
  r = svc.request("POST", "/api/v1/streams", "{not json");
  CHECK(r.status == 400);
  CHECK(r.parsed()["error"].get<std::string>().find("not JSON") != std::string::npos);
  r = svc.request("POST", "/api/v1/streams", "", kToken, "-H 'Content-Type: application/json' --data-binary @'" + svc.dir() + "/big.json'");
  CHECK(r.status == 413);

  // Files only under api.allowed_dirs, however the path is spelled.
  for (const auto& bad : {json{{"name", "f"}, {"kind", "file"}, {"path", "/etc/hostname"}},
                          json{{"name", "f"}, {"kind", "file"}, {"path", svc.dir() + "/media/../elsewhere/x.mp4"}},
                          json{{"name", "f"}, {"kind", "file"}, {"path", svc.dir() + "/media/link.mp4"}},
                          json{{"name", "f"}, {"kind", "uri"}, {"uri", "file://" + svc.dir() + "/elsewhere/x.mp4"}},
                          json{{"name", "f"}, {"kind", "image"}, {"path", "/etc"}}}) {
    r = svc.add(bad);
    CHECK_MESSAGE(r.status == 403, bad.dump());
    CHECK(r.parsed()["error"].get<std::string>().find("api.allowed_dirs") != std::string::npos);
  }
  r = svc.add({{"name", "f"}, {"kind", "file"}, {"path", svc.dir() + "/media/none.mp4"}});  // allowed, but missing
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "input.path");

  // Names: running (409), unknown (404); capacity (503, max_streams 2).
  CHECK(svc.add({{"name", "a"}, {"kind", "test"}}).status == 409);
  CHECK(svc.remove("nope").status == 404);
  CHECK(svc.get("/api/v1/streams/nope", kToken).status == 404);
  CHECK(svc.get("/api/v1/nothing", kToken).status == 404);
  CHECK(svc.add(ok).status == 201);
  CHECK(svc.stop() == 0);
}

TEST_CASE("API: capacity, snapshots, the live view, events, the effective config, a mosaic refusing new streams") {
  Service svc("views");
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: smpte}\noutput:\n  results: out/{stream}.jsonl\n",
                   "  max_streams: 2\n  mjpeg_clients: 1\n");
  svc.start();
  CHECK(svc.add({{"name", "b"}, {"kind", "test"}, {"pattern", "ball"}}).status == 201);
  auto r = svc.add({{"name", "c"}, {"kind", "test"}});
  CHECK(r.status == 503);
  CHECK(r.parsed()["error"].get<std::string>().find("api.max_streams") != std::string::npos);
  CHECK(svc.remove("b").status == 200);
  CHECK(svc.add({{"name", "c"}, {"kind", "test"}, {"pattern", "checkers-8"}}).status == 201);  // b's slot, reused
  CHECK(svc.wait_frames("c", 0) > 0);
  // Streams that cannot start (a camera that is not there) give their slot back: the run never fills up with them.
  CHECK(svc.remove("c").status == 200);
  for (int i = 0; i < 3; ++i) {
    r = svc.add({{"name", "cam"}, {"kind", "webcam"}, {"device", "/dev/video-none"}});
    CHECK_MESSAGE(r.status == 422, r.body);
    CHECK(r.parsed()["key"] == "input.device");
  }
  CHECK(svc.add({{"name", "d"}, {"kind", "test"}}).status == 201);
  CHECK(svc.wait_frames("d", 0) > 0);

  // The latest labelled frame: a JPEG, scaled when asked.
  svc.wait_frames("a", 0);
  r = svc.get("/api/v1/streams/a/snapshot.jpg?width=160");
  REQUIRE(r.status == 200);
  REQUIRE(r.body.size() > 100);
  CHECK(static_cast<unsigned char>(r.body[0]) == 0xFF);
  CHECK(static_cast<unsigned char>(r.body[1]) == 0xD8);
  const auto jpeg = svc.dir() + "/snapshot.jpg";
  std::ofstream(jpeg, std::ios::binary) << r.body;
  const auto probe = run_command("gst-discoverer-1.0 -v '" + jpeg + "' | grep -i 'width: 160'");
  CHECK_MESSAGE(probe.code == 0, probe.output);
  CHECK(svc.get("/api/v1/streams/a/snapshot.jpg?width=0").status == 422);
  CHECK(svc.get("/api/v1/streams/nope/snapshot.jpg").status == 404);

  // The live view: several JPEG parts; a second viewer beyond mjpeg_clients is turned away while the first watches.
  const auto parts = svc.dir() + "/live.txt";
  // (the second asks once the first has its first part: the first is connected then)
  (void)run_command("curl -s --max-time 4 '" + svc.url("/api/v1/streams/a/live.mjpeg?width=160") + "' >'" + parts +
                    "' & until grep -q -- --frame '" + parts + "'; do sleep 0.05; done; curl -s -o /dev/null -w '%{http_code}' '" +
                    svc.url("/api/v1/streams/a/live.mjpeg") + "' >'" + svc.dir() + "/second.txt'; wait");
  const auto live = svc.file("live.txt");
  size_t frames = 0;
  for (auto at = live.find("--frame"); at != std::string::npos; at = live.find("--frame", at + 1)) ++frames;
  CHECK(frames >= 2);
  CHECK(live.find("Content-Type: image/jpeg") != std::string::npos);
  CHECK(svc.file("second.txt") == "503");

  // Events: label changes (no rules) with sequence numbers; `since` gives only the later ones.
  const auto events = svc.get("/api/v1/events?stream=a").parsed();
  REQUIRE(!events["events"].empty());
  CHECK(events["events"][0]["event"] == "label_change");
  CHECK(events["events"][0]["stream"] == "a");
  const auto since = svc.get("/api/v1/events?since=" + std::to_string(events["last"].get<uint64_t>())).parsed();
  for (const auto& e : since["events"]) CHECK(e["seq"].get<uint64_t>() > events["last"].get<uint64_t>());
  CHECK(svc.get("/api/v1/events?limit=x").status == 422);

  // The effective configuration: the model file's own values (the fixture card says nothing the flags did not; the
  // flags' values show), the api section as configured.
  const auto cfg = svc.get("/api/v1/config").parsed();
  CHECK(cfg["model"]["input_size"] == 64);
  CHECK(cfg["api"]["max_streams"] == 2);
  const auto status = svc.get("/api/v1/status").parsed();
  CHECK(status["engine"].get<std::string>().find("CPU") != std::string::npos);
  CHECK(status["changes_allowed"] == true);
  CHECK(svc.get("/").body.find("<title>video-classifier</title>") != std::string::npos);
  CHECK(svc.stop() == 0);

  // A mosaic is laid out for the streams it starts with. And a client that changes things faster than
  // api.rate_per_s (0.1: one change in 10 s) is told to wait.
  Service tiled("tiled");
  tiled.write_config("inputs:\n  - {name: a, kind: test}\noutput:\n  kind: file\n  path: out/all.mkv\n  tiled: true\n",
                     "  rate_per_s: 0.1\n");
  tiled.start();
  r = tiled.add({{"name", "b"}, {"kind", "test"}});
  CHECK(r.status == 422);
  CHECK(r.parsed()["key"] == "output.tiled");
  r = tiled.add({{"name", "b"}, {"kind", "test"}});
  CHECK(r.status == 429);
  CHECK(r.parsed()["error"].get<std::string>().find("api.rate_per_s") != std::string::npos);
  CHECK(tiled.stop() == 0);
}

TEST_CASE("API: without a token nothing can be changed, and the page and reads stay open") {
  Service svc("readonly");
  svc.write_config("inputs:\n  - {name: a, kind: test}\n", "", false);
  svc.start();
  CHECK(svc.get("/api/v1/streams").status == 200);
  const auto r = svc.add({{"name", "b"}, {"kind", "test"}});
  CHECK(r.status == 403);
  CHECK(r.parsed()["error"].get<std::string>().find("no token") != std::string::npos);
  CHECK(svc.get("/api/v1/status").parsed()["changes_allowed"] == false);
  CHECK(svc.stop() == 0);
}

TEST_SUITE_END();
