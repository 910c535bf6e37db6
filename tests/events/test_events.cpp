// Events end to end: a video in which a pattern appears twice gives exactly two events, each with a clip of the
// source's own packets covering [start - pre_s, end + post_s] and a snapshot of its peak frame; a clip being written
// when the process is killed plays; a full disk loses the clips, never the classification, and says so in the exit
// code; MQTT subscribers get new, update and end.
#include <doctest/doctest.h>
#include <fmt/ranges.h>

#include <ctime>
#include <map>
#include <set>

#include "events/event_media.hpp"
#include "pipeline/runner.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("events");

namespace {

struct Expected {
  double start, end;      // seconds on the video's timeline
  int64_t peak_frame;
  bool grey_peak;         // the snapshot shows the grey ball
};

// The events.jsonl lines of each event id, in order.
std::map<std::string, std::vector<nlohmann::json>> events_by_id(const std::string& file) {
  std::map<std::string, std::vector<nlohmann::json>> by_id;
  for (const auto& j : read_jsonl(file)) by_id[j["id"].get<std::string>()].push_back(j);
  return by_id;
}

// The app's arguments for a rule that always holds (every label of the fixture model, no threshold); its events
// last at most `max_duration_s`.
std::string always_rule(const std::string& dir, double max_duration_s = 3600) {
  return "--set events.dir='" + dir + "' --set smoothing.threshold=0 --set events.rules='[{name: any, labels: [class-0, "
         "class-1, class-2, class-3, class-4, class-5, class-6, class-7, class-8, class-9], min_confidence: 0, "
         "min_duration_s: 0.2, cooldown_s: 0.5, max_duration_s: " + std::to_string(max_duration_s) + "}]' ";
}

// `c` (event_video() in, a rule on class-1) run with the test's classifier, which sees the white picture; it must end ok.
pipeline::RunSummary run_events(config::Config c) {
  config::validate(c);
  auto engine = std::make_unique<FakeClassifier>(2, 4);
  engine->logits_of = event_logits;
  pipeline::Runner runner(c, std::move(engine));
  std::atomic<int> stop{0};
  auto summary = runner.run(stop);
  REQUIRE_MESSAGE(summary.code == ExitCode::kOk, fmt::format("{}", fmt::join(summary.problems, "; ")));
  return summary;
}

}  // namespace

TEST_CASE("a pattern that appears twice: two events, clips of the source's own packets, snapshots of the peak") {
  const auto video = event_video();
  const auto dir = path("events-e2e"), results = path("events-e2e.jsonl");
  fs::remove_all(dir);
  auto c = config::parse_config("input: {kind: file, path: '" + video + "'}\n"
                                "output: {kind: none, results: '" + results + "'}\n"
                                "smoothing: {window: 1}\n"
                                "events:\n"
                                "  dir: '" + dir + "'\n"
                                "  pre_s: 2\n  post_s: 2\n  release_s: 0.5\n"
                                "  rules:\n"
                                "    - {name: seen, labels: [class-1], min_confidence: 0.6, min_duration_s: 0.5, cooldown_s: 1}\n"
                                "  snapshots: {clean: true, thumbnail_px: 64}\n");
  const auto summary = run_events(c);
  CHECK(summary.events.find("2 event(s), 2 clip(s), 2 snapshot(s)") == 0);

  const auto by_id = events_by_id(dir + "/events.jsonl");
  REQUIRE(by_id.size() == 2);  // exactly one event per appearance
  const auto source = packets_of(video);
  REQUIRE(source.size() == 500);
  // The file's first picture is shown at t0 (its B-frames delay the first; the container keeps that).
  int64_t t0_ns = INT64_MAX;
  for (const auto& p : source) t0_ns = std::min(t0_ns, p.pts_ns);
  const double t0 = double(t0_ns) / 1e9;
  const std::vector<Expected> expected{{t0 + 4.0, t0 + 7.0, 130, true}, {t0 + 13.0, t0 + 16.0, 325, false}};
  size_t k = 0;
  for (const auto& [id, lines] : by_id) {  // ids sort by start time
    CAPTURE(id);
    const auto& want = expected.at(k++);
    REQUIRE(lines.size() >= 2);
    CHECK(lines.front()["type"] == "new");
    CHECK(lines.back()["type"] == "end");
    for (size_t i = 1; i + 1 < lines.size(); ++i) CHECK(lines[i]["type"] == "update");
    const auto& end = lines.back();
    CHECK(end["stream"] == "stream0");
    CHECK(end["rule"] == "seen");
    CHECK(end["label"] == "class-1");
    CHECK(end["start"].get<double>() == doctest::Approx(want.start).epsilon(1e-6));
    CHECK(end["end"].get<double>() == doctest::Approx(want.end).epsilon(1e-6));
    CHECK(end["peak"]["frame"] == want.peak_frame);
    CHECK(end["reason"] == "released");
    CHECK(!end["start_time"].get<std::string>().empty());
    CHECK(!end["end_time"].get<std::string>().empty());

    // The clip: from the keyframe at or before start - pre_s (within one group of pictures, 1 s) to end + post_s.
    const auto clip_file = end["clip"].get<std::string>();
    REQUIRE(fs::exists(clip_file));
    // The clip's timestamps + clip_start are the stream's.
    const auto clip_start_ns = int64_t(std::llround(end["clip_start"].get<double>() * 1e9));
    const auto clip = packets_of(clip_file);
    REQUIRE(!clip.empty());
    CHECK(clip.front().keyframe);
    int64_t first_ns = INT64_MAX, last_ns = 0;
    for (const auto& p : clip) {
      first_ns = std::min(first_ns, clip_start_ns + p.pts_ns);
      last_ns = std::max(last_ns, clip_start_ns + p.pts_ns);
    }
    CHECK(double(first_ns) / 1e9 <= want.start - 2.0 + 1e-3);
    CHECK(double(first_ns) / 1e9 > want.start - 2.0 - 1.0);
    CHECK(double(last_ns) / 1e9 >= want.end + 2.0 - 1e-3);
    CHECK(double(last_ns) / 1e9 <= want.end + 2.0 + 1.0);
    // Its packets are the source's, in order, none missing, none re-encoded: the same slices, byte for byte, at the
    // same times.
    size_t first = 0;
    while (first < source.size() && std::abs(source[first].pts_ns - (clip_start_ns + clip.front().pts_ns)) > 1'000'000) ++first;
    REQUIRE(first < source.size());
    REQUIRE(first + clip.size() <= source.size());
    size_t same = 0;
    for (size_t i = 0; i < clip.size(); ++i) {
      const auto& s = source[first + i];
      const bool equal = slices_of(clip[i]) == slices_of(s) && !slices_of(s).empty() &&
                         std::abs(clip_start_ns + clip[i].pts_ns - s.pts_ns) < 1'000'000;
      same += equal;
      if (!equal) {
        FAIL_CHECK("clip packet " << i << " (pts " << clip[i].pts_ns << ", " << slices_of(clip[i]).size()
                   << " bytes of slices) differs from source packet " << first + i << " (pts " << s.pts_ns << ", "
                   << slices_of(s).size() << " bytes)");
        if (i > 3) break;
      }
    }
    CHECK(same == clip.size());

    // The snapshot is the peak frame: the grey ball (frame 130) for the first, a black ball for the second.
    int w = 0, h = 0;
    const auto y = first_frame_luma(end["snapshot"].get<std::string>(), config::InputKind::Image, w, h);
    REQUIRE(w == 320);
    REQUIRE(h == 240);
    int64_t grey = 0, black = 0;
    for (uint8_t p : y) {
      grey += p > 40 && p < 100;
      black += p < 25;
    }
    CHECK((grey > black) == want.grey_peak);
    first_frame_luma(end["thumbnail"].get<std::string>(), config::InputKind::Image, w, h);
    CHECK(w == 64);
  }
  // The same events went to the results file, in between the frames' lines.
  int64_t rule_lines = 0;
  for (const auto& j : read_jsonl(results)) rule_lines += j.value("event", "") == "rule";
  size_t event_lines = 0;
  for (const auto& [id, lines] : by_id) event_lines += lines.size();
  CHECK(rule_lines == int64_t(event_lines));
}

TEST_CASE("an event never writes over files already there (a stream back under its name within the second, a restart)") {
  const auto video = event_video();
  const auto dir = path("events-no-overwrite");
  fs::remove_all(dir);
  fs::create_directories(dir + "/stream0");
  // Files named as this run's events would be (seq 1 and 2, any start second of the next two minutes): the user's, or
  // an earlier run's.
  const auto now = std::time(nullptr);
  std::set<std::string> theirs;
  for (auto t = now - 2; t < now + 120; ++t) {
    char stamp[32];
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    for (int seq : {1, 2}) {
      for (const char* ext : {".jpg", "-thumb.jpg", ".mp4"}) {
        const auto file = fmt::format("{}/stream0/stream0-seen-{}-{}{}", dir, stamp, seq, ext);
        std::ofstream(file) << "theirs";
        theirs.insert(file);
      }
    }
  }
  auto c = config::parse_config("input: {kind: file, path: '" + video + "'}\noutput: {kind: none}\nsmoothing: {window: 1}\n"
                                "events:\n  dir: '" + dir + "'\n  pre_s: 1\n  post_s: 1\n  release_s: 0.5\n  rules:\n"
                                "    - {name: seen, labels: [class-1], min_confidence: 0.6, min_duration_s: 0.5, cooldown_s: 1}\n");
  (void)run_events(c);
  const auto by_id = events_by_id(dir + "/events.jsonl");
  REQUIRE(by_id.size() == 2);
  for (const auto& [id, lines] : by_id) {
    CAPTURE(id);
    const auto& end = lines.back();
    for (const char* file : {"clip", "snapshot", "thumbnail"}) {
      CHECK(!theirs.count(end[file].get<std::string>()));  // a name of its own
      CHECK(slurp(end[file].get<std::string>()) != "theirs");
    }
  }
  for (const auto& file : theirs) CHECK(slurp(file) == "theirs");  // none written over
}

TEST_CASE("kill -9 while a clip is being written: what was written plays") {
  const auto dir = path("events-kill");
  fs::remove_all(dir);
  // A live test pattern (raw video: the app encodes its clip packets); the rule holds at once and never ends, so the
  // clip is being written when the process dies — once it holds two seconds of fragments.
  const auto r = run_command(
      "(" + app_direct("--input test:ball --set input.fps=30 --output none " + always_rule(dir) +
                       "--set events.pre_s=0") +
      ") & a=$!; for i in $(seq 300); do f=$(ls '" + dir + "'/stream0/*.mp4 2>/dev/null | head -n1); "
      "[ -n \"$f\" ] && [ $(stat -c %s \"$f\") -gt 30000 ] && break; sleep 0.1; done; kill -9 $a; wait $a; echo killed=$?");
  REQUIRE_MESSAGE(r.output.find("killed=137") != std::string::npos, r.output);
  std::vector<fs::path> clips;
  for (const auto& e : fs::directory_iterator(dir + "/stream0")) {
    if (e.path().extension() == ".mp4") clips.push_back(e.path());
  }
  REQUIRE(clips.size() == 1);
  CHECK(count_frames(clips[0].string()) >= 30);  // at least a second of it decodes
}

TEST_CASE("a full disk: the clips are lost and said to be, the classification goes on, the exit code is 74") {
  const auto dir = path("events-full");
  fs::remove_all(dir);
  // Files over 64 KiB cannot grow (SIGXFSZ ignored: the write fails, as on a full disk); the results go to a pipe.
  const auto r = run_command("sh -c \"trap '' XFSZ; ulimit -f 128; exec " + app_direct(
      "--input test:snow --set input.fps=30 --set input.max_frames=120 --output none --set output.results=- " +
      always_rule(dir) + "--set events.snapshots.enabled=false") + "\" > '" + path("events-full.jsonl") + "'");
  CHECK_MESSAGE(r.code == 74, r.output);
  CHECK(r.output.find("event clip") != std::string::npos);
  CHECK(r.output.find("classification is not affected") != std::string::npos);
  CHECK(frame_lines(path("events-full.jsonl")) == 120);  // every frame classified
}

TEST_CASE("MQTT: events go to PREFIX/STREAM/event as new, update and end") {
  const auto port = free_port(43000);
  const auto broker = path("events-broker-" + port);
  fs::create_directories(broker);
  std::ofstream(broker + "/mosquitto.conf") << "listener " << port << " 127.0.0.1\nallow_anonymous true\n";
  const auto got = path("events-mqtt-" + port + ".txt"), dir = path("events-mqtt");
  fs::remove_all(dir);
  // 3 s of a live pattern; events at most 1 s long: new, an update, end, and again.
  const auto r = run_command(
      "mosquitto -c '" + broker + "/mosquitto.conf' >'" + broker + "/log' 2>&1 & b=$!; sleep 0.5; "
      "mosquitto_sub -h 127.0.0.1 -p " + port + " -t 'vc/+/event' -v -q 1 >'" + got + "' 2>&1 & s=$!; sleep 0.5; " +
      app("--set mqtt.enabled=true --set mqtt.host=127.0.0.1 --set mqtt.port=" + port + " --set mqtt.topic_prefix=vc "
          "--set mqtt.qos=1 --input test --set input.fps=30 --set input.max_frames=90 --output none " + always_rule(dir, 1) +
          "--set events.update_s=0.5") +
      "; rc=$?; sleep 1; kill $s $b; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  std::map<std::string, std::vector<std::string>> types;  // by event id
  std::ifstream in(got);
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    REQUIRE(space != std::string::npos);
    CHECK(line.substr(0, space) == "vc/stream0/event");
    const auto j = nlohmann::json::parse(line.substr(space + 1), nullptr, false);
    REQUIRE(!j.is_discarded());
    if (j.value("event", "") != "rule") continue;  // (label changes go to the same topic)
    types[j["id"].get<std::string>()].push_back(j["type"].get<std::string>());
    if (j["type"] == "end") CHECK(fs::exists(j["snapshot"].get<std::string>()));
  }
  REQUIRE(types.size() >= 2);
  bool updated = false;
  for (const auto& [id, t] : types) {
    CAPTURE(id);
    CHECK(t.front() == "new");
    CHECK(t.back() == "end");
    CHECK(std::count(t.begin(), t.end(), "new") == 1);
    CHECK(std::count(t.begin(), t.end(), "end") == 1);
    updated |= std::count(t.begin(), t.end(), "update") > 0;
  }
  CHECK(updated);
}
