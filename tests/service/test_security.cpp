// The service as an attacker and an operator who runs it for months see it, against real runs (curl): paths that try
// to leave api.allowed_dirs, credentials in camera URIs (in no output, answer or message), token guesses, the page's
// read-only session, failed and ended streams that can be removed, SIGHUP leaving API-added streams alone, and a
// state file only its owner reads. The HTTP server's own bounds: http_limits_test.py; many streams coming and going:
// test_churn.cpp.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <regex>

#include "service/service_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("security");

namespace {

// One PNG test pattern at `file`.
void make_image(const std::string& file, int pattern) {
  const auto r = run_command("gst-launch-1.0 -q videotestsrc num-buffers=1 pattern=" + std::to_string(pattern) +
                             " ! video/x-raw,width=64,height=48 ! pngenc ! filesink location='" + file + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
}

// Every file under `dir` (but `except`), and what it holds.
std::vector<std::pair<std::string, std::string>> every_file(const std::string& dir, const std::set<std::string>& except) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || except.count(e.path().filename().string())) continue;
    out.emplace_back(e.path().string(), slurp(e.path().string()));
  }
  return out;
}

}  // namespace

TEST_CASE("API paths: globs, '..', links, file: URIs and other schemes cannot reach outside api.allowed_dirs") {
  Service svc("paths");
  const auto media = svc.dir() + "/media", secret = svc.dir() + "/secret";
  fs::create_directories(secret);
  fs::create_directories(media + "/imgs");
  make_image(secret + "/s.png", 1);                 // what must never be read
  std::ofstream(secret + "/v.mp4") << "not read";
  make_image(media + "/imgs/mine.png", 2);          // what may be
  fs::create_symlink(secret + "/s.png", media + "/imgs/theirs.png");  // a link inside an allowed folder
  fs::create_symlink(secret, media + "/link-dir");  // a folder link inside it
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: ball, fps: 10}\noutput:\n  results: out/{stream}.jsonl\n",
                   "  rate_per_s: 10000\n");
  svc.start();
  const std::vector<json> escapes = {
      {{"name", "g1"}, {"kind", "image"}, {"path", media + "/.?/secret/*.png"}},    // glob(3) would make '.?' '..'
      {{"name", "g2"}, {"kind", "image"}, {"path", media + "/.[.]/secret/s.png"}},
      {{"name", "g3"}, {"kind", "image"}, {"path", media + "/imgs/*.png"}},         // a glob even inside
      {{"name", "d1"}, {"kind", "file"}, {"path", media + "/../secret/v.mp4"}},
      {{"name", "d2"}, {"kind", "image"}, {"path", media + "/./imgs/mine.png"}},
      {{"name", "l1"}, {"kind", "image"}, {"path", media + "/link-dir"}},           // a link to a folder
      {{"name", "l2"}, {"kind", "image"}, {"path", media + "/link-dir/s.png"}},
      {{"name", "l3"}, {"kind", "image"}, {"path", media + "/imgs/theirs.png"}},    // a link to a file
      {{"name", "u1"}, {"kind", "uri"}, {"uri", "file:" + secret + "/v.mp4"}},      // one slash: still a file
      {{"name", "u2"}, {"kind", "uri"}, {"uri", "FILE://" + secret + "/v.mp4"}},
      {{"name", "u3"}, {"kind", "uri"}, {"uri", "file://localhost" + secret + "/v.mp4"}},
      {{"name", "u4"}, {"kind", "uri"}, {"uri", "fd://0"}},
      {{"name", "u5"}, {"kind", "uri"}, {"uri", "appsrc://x"}},
      {{"name", "u6"}, {"kind", "uri"}, {"uri", "file://" + media + "/../secret/v.mp4"}},
      {{"name", "w1"}, {"kind", "webcam"}, {"device", secret + "/v.mp4"}},  // a "camera" that is any file
      {{"name", "w2"}, {"kind", "webcam"}, {"device", "/dev/null"}},
  };
  for (const auto& bad : escapes) {
    CAPTURE(bad.dump());
    const auto r = svc.add(bad);
    CHECK(r.status == 403);
    CHECK(r.parsed()["error"].is_string());
  }
  CHECK(svc.names() == "a");  // none of them was added
  // A folder inside: its own images are read, the link in it is not.
  const auto ok = svc.add({{"name", "imgs"}, {"kind", "image"}, {"path", media + "/imgs"}});
  REQUIRE_MESSAGE(ok.status == 201, ok.body);
  for (int i = 0; i < 300 && svc.stream("imgs")["state"] != "ended"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(svc.stream("imgs")["state"] == "ended");
  const auto lines = read_jsonl(svc.dir() + "/out/imgs.jsonl");
  int frames = 0;
  for (const auto& j : lines) {
    if (!j.contains("top")) continue;
    ++frames;
    CHECK(j["source"].get<std::string>().find("mine.png") != std::string::npos);
  }
  CHECK(frames == 1);
  // A file: URI inside the allowed folder is the file it names (and is read as one).
  make_video("api-clip.mp4", 10);
  fs::copy_file(path("api-clip.mp4"), media + "/clip.mp4");
  const auto uri = svc.add({{"name", "clip"}, {"kind", "uri"}, {"uri", "file://" + media + "/clip.mp4"}});
  CHECK_MESSAGE(uri.status == 201, uri.body);
  CHECK(svc.wait_frames("clip", 0) > 0);
  CHECK(svc.stop() == 0);
  CHECK(svc.log().find("s.png") == std::string::npos);
}

TEST_CASE("credentials in a camera's URI reach no file, answer, log line or MQTT message") {
  const std::vector<std::string> secrets = {"S3cretPass", "TokSecret9", "ApiPass77", "FailPass55", "admin:", "bob:", "eve:"};
  const auto rtsp_port = free_port(44000), closed_port = free_port(44000);
  const auto server_pid = path("cred-server-" + rtsp_port + ".pid");
  REQUIRE(run_command(app_direct("--input test --set input.fps=15 --set input.width=160 --set input.height=120 --output "
                                 "rtsp://127.0.0.1:" + rtsp_port + "/live") + " >/dev/null 2>&1 & echo $! >'" + server_pid + "'")
              .code == 0);
  Broker broker;
  REQUIRE(run_command(broker.start()).code == 0);
  Service svc("credentials");
  const auto mqtt_log = svc.dir() + "/mqtt.txt";
  REQUIRE(run_command(broker.subscribe(mqtt_log)).code == 0);
  const std::string cam = "rtsp://admin:S3cretPass@127.0.0.1:" + rtsp_port + "/live?token=TokSecret9";
  svc.write_config("inputs:\n  - {name: cam, kind: uri, uri: '" + cam + "'}\n"
                   "output:\n  kind: file\n  path: out/{stream}.mkv\n  results: out/{stream}.jsonl\n"
                   "  collect: {dir: out/unsure, below_confidence: 1.0, max_per_minute: 60}\n"
                   "events:\n  dir: out/events\n  pre_s: 0.5\n  post_s: 0.5\n"
                   "  rules: [{name: any, labels: ['*'], min_confidence: 0, min_duration_s: 0.2, max_duration_s: 1, cooldown_s: 0.5}]\n"
                   "smoothing:\n  threshold: 0\n"
                   "mqtt:\n  enabled: true\n  host: 127.0.0.1\n  port: " + broker.port + "\n  topic_prefix: vc\n  result_interval_s: 0\n");
  svc.start();
  CHECK(svc.wait_frames("cam", 20) > 20);
  auto r = svc.add({{"name", "api-cam"}, {"kind", "uri"}, {"uri", "rtsp://bob:ApiPass77@127.0.0.1:" + rtsp_port + "/live"}});
  REQUIRE_MESSAGE(r.status == 201, r.body);
  CHECK(r.body.find("***@") != std::string::npos);  // shown: that it has credentials, never what they are
  r = svc.add({{"name", "gone"}, {"kind", "uri"}, {"uri", "rtsp://eve:FailPass55@127.0.0.1:" + closed_port + "/x"},
               {"reconnect", {{"attempts", 1}, {"delay_s", 0.1}}}});
  CHECK_MESSAGE((r.status == 201 || r.status == 422), r.body);
  for (int i = 0; i < 100 && svc.stream("api-cam")["state"] == "starting"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < 200 && svc.get("/api/v1/events?type=rule").parsed()["events"].size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Every answer the service gives, kept beside the run's other files.
  int n = 0;
  for (const auto& p : {"/api/v1/streams", "/api/v1/streams/cam", "/api/v1/streams/api-cam", "/api/v1/streams/gone",
                        "/api/v1/events", "/api/v1/config", "/api/v1/status", "/metrics", "/healthz", "/"}) {
    std::ofstream(svc.dir() + "/answer-" + std::to_string(n++) + ".txt") << svc.get(p).body;
  }
  const int rc = svc.stop();
  CHECK((rc == 0 || rc == 69));  // (69: "gone" failed, as it should)
  (void)run_command("sleep 1; " + broker.stop_subscriber() + "; kill " + broker.pid() + "; kill -INT $(cat '" + server_pid + "')");
  const auto messages = slurp(mqtt_log);
  CHECK(messages.find("vc/cam/result") != std::string::npos);  // (the subscriber heard the run)
  CHECK(messages.find("***@") != std::string::npos);
  // Every file the run wrote — results, events.jsonl, clips, snapshots, collect.jsonl, the log — and every answer.
  // Not the config file (the user's own) nor the state file (the service's own config: it must reconnect).
  const auto files = every_file(svc.dir(), {"service.yaml", "state.yaml", "body.in"});
  CHECK(files.size() > 10);
  for (const auto& [file, text] : files) {
    for (const auto& secret : secrets) {
      CHECK_MESSAGE(text.find(secret) == std::string::npos, std::string(file + " holds " + secret));
    }
  }
  for (const auto& secret : secrets) CHECK_MESSAGE(messages.find(secret) == std::string::npos, std::string("MQTT: " + secret));
  CHECK(svc.log().find("***@127.0.0.1") != std::string::npos);
}

TEST_CASE("token guesses are limited per client; the page's session reads but never changes") {
  Service svc("guesses");
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: ball, fps: 10}\n", "  protect_reads: true\n");
  svc.start();
  const std::string from = "--interface 127.0.0.7";
  int refused = 0;
  for (int i = 0; i < 10; ++i) refused += svc.request("GET", "/api/v1/streams", "", "wrong-" + std::to_string(i), from).status == 403;
  CHECK(refused == 10);
  auto r = svc.request("GET", "/api/v1/streams", "", "wrong-again", from);
  CHECK(r.status == 429);
  CHECK(r.parsed()["error"].get<std::string>().find("wrong tokens") != std::string::npos);
  CHECK(svc.request("GET", "/api/v1/streams", "", kToken, from).status == 429);  // not even the right one, for a while
  CHECK(svc.request("GET", "/api/v1/streams", "", kToken, "--interface 127.0.0.8").status == 200);  // others: heard
  // A session: opened with the token, it reads (as <img> and <video> do) and changes nothing.
  const auto jar = svc.dir() + "/cookies.txt";
  r = svc.request("POST", "/api/v1/session", "", kToken, "-c '" + jar + "'");
  CHECK(r.status == 200);
  CHECK(slurp(jar).find("vc_session") != std::string::npos);
  CHECK(svc.request("GET", "/api/v1/streams", "", "", "-b '" + jar + "'").status == 200);
  CHECK(svc.request("GET", "/api/v1/streams/a/snapshot.jpg", "", "", "-b '" + jar + "'").status != 401);
  CHECK(svc.request("POST", "/api/v1/streams", json{{"name", "x"}, {"kind", "test"}}.dump(), "", "-b '" + jar + "'").status == 401);
  CHECK(svc.request("DELETE", "/api/v1/streams/a", "", "", "-b '" + jar + "'").status == 401);
  CHECK(svc.request("GET", "/api/v1/streams", "", "", "-b 'vc_session=made-up'").status == 401);
  CHECK(svc.stop() == 0);
}

TEST_CASE("a failed stream can be removed (and /healthz is well again); SIGHUP leaves API-added streams be") {
  Service svc("failed");
  const auto closed = free_port(44500);
  svc.write_config("inputs:\n  - {name: a, kind: test, pattern: ball, fps: 10}\noutput:\n  results: out/{stream}.jsonl\n");
  svc.start();
  auto r = svc.add({{"name", "dead"}, {"kind", "uri"}, {"uri", "rtsp://127.0.0.1:" + closed + "/none"},
                    {"reconnect", {{"attempts", 1}, {"delay_s", 0.1}}}});
  const bool dead_started = r.status == 201;
  if (dead_started) {  // (it may fail at once, 422, or after its one restart)
    for (int i = 0; i < 300 && svc.stream("dead")["state"] != "failed"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(svc.stream("dead")["state"] == "failed");
    CHECK(svc.get("/healthz").status == 503);
    r = svc.remove("dead");
    CHECK_MESSAGE(r.status == 200, r.body);
    CHECK(svc.get("/healthz").status == 200);
    CHECK(svc.names() == "a");
    CHECK(svc.remove("dead").status == 404);  // let go of: gone for good
  } else {
    CHECK_MESSAGE(r.status == 422, r.body);
  }
  // An ended stream too: a short file played to its end is removed, and its name can be used again.
  REQUIRE(svc.add({{"name", "clip"}, {"kind", "file"}, {"path", make_video("api-short.mp4", 5)}}).status == 403);  // not allowed
  fs::copy_file(path("api-short.mp4"), svc.dir() + "/media/short.mp4", fs::copy_options::overwrite_existing);
  REQUIRE(svc.add({{"name", "clip"}, {"kind", "file"}, {"path", svc.dir() + "/media/short.mp4"}}).status == 201);
  for (int i = 0; i < 300 && svc.stream("clip")["state"] != "ended"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(svc.remove("clip").status == 200);
  CHECK(svc.names() == "a");
  // SIGHUP: the config file's streams are brought in line with it; the API's are kept, and said to be.
  REQUIRE(svc.add({{"name", "mine"}, {"kind", "test"}, {"pattern", "smpte"}}).status == 201);
  svc.write_config("inputs:\n  - {name: b, kind: test, pattern: ball, fps: 10}\noutput:\n  results: out/{stream}.jsonl\n");
  svc.signal("HUP");
  std::string log;
  for (int i = 0; i < 300 && (log = svc.log()).find("SIGHUP: streams added") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK_MESSAGE(log.find("SIGHUP: streams added: b; removed: a; changed: none") != std::string::npos, log);
  CHECK(log.find("kept (added over the API): mine") != std::string::npos);
  CHECK(svc.names() == "mine,b");
  const auto state = svc.file("state.yaml");
  CHECK(state.find("added_over_api: [mine]") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat((svc.dir() + "/state.yaml").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);  // a camera's URI may hold its password
  // A stream failed in this run: removed or not, the exit code says so (unless it could not even start).
  CHECK(svc.stop() == (dead_started ? 69 : 0));
  // A restart keeps knowing which streams are the API's: another SIGHUP still leaves "mine" be.
  svc.start();
  CHECK(svc.names() == "mine,b");
  svc.signal("HUP");
  for (int i = 0; i < 300 && svc.log().find("kept (added over the API): mine", log.size()) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(svc.names() == "mine,b");
  CHECK(svc.stop() == 0);
}

TEST_SUITE_END();
