// The REST API against a real run (the app on the CPU engine, driven with curl): streams added and removed while the
// others go on, outputs and results finalized on removal, the state file across a restart, SIGHUP reconciling the
// streams with the edited config file, and every error a client can get (400, 401, 403, 404, 409, 413, 422, 429,
// 503). The web page in a real browser: tests/service/web_page_test.py.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <thread>

#include "service/service_helpers.hpp"

using namespace vc;
using namespace vc::test;
using json = nlohmann::json;

TEST_SUITE_BEGIN("api");


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
    r = svc.add({{"name", "cam"}, {"kind", "webcam"}, {"device", "/dev/video99"}});
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

TEST_CASE("API: a stream's regions are read and replaced while it runs; results follow at once, bad ones are refused") {
  Service svc("regions");
  svc.write_config("inputs:\n  - {name: cam, kind: test, pattern: smpte75, fps: 15, width: 320, height: 240}\n"
                   "output:\n  results: out/{stream}.jsonl\n");
  svc.start();
  svc.wait_frames("cam", 0);
  auto now = svc.get("/api/v1/streams/cam/regions").parsed();
  CHECK(now["regions"].empty());
  CHECK(now["whole"] == true);
  CHECK(now["width"] == 320);

  // Two regions, the whole picture kept: from the next frames on, each has its results, with no restart.
  const json regions = {{"regions", {{{"name", "gate"}, {"box", {10, 20, 100, 50}}},
                                     {{"name", "mat"}, {"box", {0.5, 0.5, 0.25, 0.5}}, {"every", 2}}}},
                        {"whole", true}};
  const auto put = svc.request("PUT", "/api/v1/streams/cam/regions", regions.dump());
  REQUIRE_MESSAGE(put.status == 200, put.body);
  CHECK(put.parsed()["regions"][1]["pixels"] == json({160, 120, 80, 120}));
  CHECK(put.parsed()["regions"][0]["model"] == "default");
  CHECK(svc.stream("cam")["restarts"] == 0);
  for (int i = 0; i < 300 && svc.stream("cam")["regions"].size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto view = svc.stream("cam");
  REQUIRE(view["regions"].size() == 2);
  CHECK(view["regions"][0]["results"].get<int64_t>() > 0);
  const auto got = svc.get("/api/v1/streams/cam/regions").parsed();
  CHECK(got["regions"][0]["label"].is_string());
  CHECK(svc.file("state.yaml").find("gate") != std::string::npos);  // kept for a restart

  // Refused, each naming why, and nothing changed: a box outside the picture, a model the run has not, unknown keys,
  // no token.
  const auto outside = svc.request("PUT", "/api/v1/streams/cam/regions",
                                   R"({"regions": [{"name": "x", "box": [300, 200, 100, 100]}]})");
  CHECK(outside.status == 422);
  CHECK(outside.body.find("is not inside the 320x240 picture") != std::string::npos);
  const auto model = svc.request("PUT", "/api/v1/streams/cam/regions",
                                 R"({"regions": [{"name": "x", "box": [0, 0, 10, 10], "model": "parcel"}]})");
  CHECK(model.status == 422);
  CHECK(model.body.find("'parcel' is not a model of models:") != std::string::npos);
  CHECK(svc.request("PUT", "/api/v1/streams/cam/regions", R"({"kind": "file"})").status == 422);
  CHECK(svc.request("PUT", "/api/v1/streams/cam/regions", regions.dump(), "").status == 401);
  CHECK(svc.request("PUT", "/api/v1/streams/nope/regions", regions.dump()).status == 404);
  CHECK(svc.get("/api/v1/streams/cam/regions").parsed()["regions"].size() == 2);

  // Taken away: the whole picture alone again.
  REQUIRE(svc.request("PUT", "/api/v1/streams/cam/regions", R"({"regions": []})").status == 200);
  svc.wait_frames("cam", svc.frames("cam") + 3);  // (a few frames classified since)
  CHECK(svc.stop() == 0);
  std::set<std::string> seen;
  bool whole_after = false;
  for (const auto& j : read_jsonl(svc.dir() + "/out/cam.jsonl")) {
    if (!j.contains("top")) continue;
    const std::string region = j.value("region", "");
    if (!region.empty()) {
      seen.insert(region);
      CHECK(j["box"].size() == 4);
      if (region == "mat") CHECK(j["frame"].get<int64_t>() % 2 == 0);
    }
    whole_after = region.empty() && !seen.empty();
  }
  CHECK(seen == std::set<std::string>{"gate", "mat"});
  CHECK(whole_after);  // the last lines are the whole picture's again
}

TEST_SUITE_END();
