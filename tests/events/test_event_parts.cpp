// The parts of the event rules, one at a time: a rule's tracker (hysteresis, cooldown, longest duration, a source
// that starts its timeline again), the packet ring (a clip starts on a keyframe, memory bounded), retention (the
// oldest first, only what it recorded, across restarts) and a clip written to a full disk.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "pipeline/events/clip_writer.hpp"
#include "pipeline/events/packet_ring.hpp"
#include "pipeline/events/retention.hpp"
#include "pipeline/events/rule_tracker.hpp"
#include "events/event_media.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("events");

namespace {

constexpr int64_t kFrameNs = 40'000'000;  // 25 fps

config::EventRule rule(double min_duration_s = 0.5, double cooldown_s = 2, double max_duration_s = 600) {
  config::EventRule r;
  r.name = "person";
  r.labels = {"person", "cyclist"};
  r.min_confidence = 0.6;
  r.min_duration_s = min_duration_s;
  r.cooldown_s = cooldown_s;
  r.max_duration_s = max_duration_s;
  return r;
}

pipeline::FrameResult result(int64_t frame, const std::string& label, float score) {
  pipeline::FrameResult r;
  r.frame = frame;
  r.pts_ns = frame * kFrameNs;
  r.smoothed = {label == "person" ? 1 : 0, score, label};
  return r;
}

// Feeds `labels` (one character a frame: 'p' person at 0.9, 'c' cyclist at 0.8, 'w' person at 0.4 — too weak,
// '.' background) from frame `first` on; returns the changes as "type@frame".
std::vector<std::string> feed(pipeline::RuleTracker& t, const std::string& labels, int64_t first = 0) {
  std::vector<std::string> changes;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t f = first + int64_t(i);
    const char c = labels[i];
    const auto r = c == 'p' ? result(f, "person", 0.9f) : c == 'c' ? result(f, "cyclist", 0.8f)
                 : c == 'w' ? result(f, "person", 0.4f) : result(f, "background", 0.9f);
    if (auto change = t.update(r, r.pts_ns)) changes.push_back(change->type + "@" + std::to_string(f));
  }
  return changes;
}

std::string repeat(char c, int n) { return std::string(size_t(n), c); }

}  // namespace

TEST_CASE("a rule opens once it has held for min_duration_s, and a flicker shorter than release_s does not split it") {
  pipeline::RuleTracker t(rule(0.5), /*release_s=*/0.4, /*update_s=*/100);
  // Holds from frame 10; 0.5 s = 12.5 frames: it opens at frame 23. Three frames off (0.12 s) at 40: the same event.
  const auto changes = feed(t, repeat('.', 10) + repeat('p', 30) + "..." + repeat('c', 20) + repeat('.', 30));
  CHECK(changes == std::vector<std::string>{"new@23", "end@73"});  // stopped at 63; ended 0.4 s (10 frames) later
}

TEST_CASE("the event's times, peak and label: from the frames, on the stream's timeline") {
  pipeline::RuleTracker t(rule(0.2), 0.2, 100);
  std::optional<pipeline::RuleTracker::Change> opened, ended;
  for (int64_t f = 0; f < 60; ++f) {
    const bool on = f >= 5 && f < 40;
    auto r = on ? result(f, f < 20 ? "person" : "cyclist", f == 30 ? 0.97f : 0.8f) : result(f, "background", 0.9f);
    if (auto c = t.update(r, r.pts_ns)) (c->type == "new" ? opened : ended) = c;
  }
  REQUIRE(opened);
  REQUIRE(ended);
  CHECK(opened->event.start_ns == 5 * kFrameNs);
  CHECK(ended->event.start_ns == 5 * kFrameNs);
  CHECK(ended->event.end_ns == 40 * kFrameNs);  // the first frame it no longer held
  CHECK(ended->event.peak_frame == 30);
  CHECK(ended->event.peak_score == doctest::Approx(0.97f));
  CHECK(ended->event.label == "cyclist");  // the label at the peak
  CHECK(ended->event.reason == "released");
}

TEST_CASE("too weak or too short never opens an event") {
  pipeline::RuleTracker t(rule(0.5), 0.4, 100);
  CHECK(feed(t, repeat('w', 100)).empty());                                   // below min_confidence
  CHECK(feed(t, repeat('p', 10) + "." + repeat('p', 10) + repeat('.', 5), 100).empty());  // never 0.5 s in a row
}

TEST_CASE("cooldown: no new event of the rule until cooldown_s after the last one ended") {
  pipeline::RuleTracker t(rule(0.2, /*cooldown_s=*/2), 0.2, 100);
  // Event 1 ends at frame 25 (stopped at 20, 0.2 s later); the cooldown runs 2 s from 20, to frame 70. The person
  // back at frames 30-60 opens nothing; back from 80 on opens a second event.
  const auto changes = feed(t, repeat('p', 20) + repeat('.', 10) + repeat('p', 30) + repeat('.', 20) + repeat('p', 20));
  CHECK(changes == std::vector<std::string>{"new@5", "end@25", "new@85"});
}

TEST_CASE("max_duration_s ends an event that would never end") {
  pipeline::RuleTracker t(rule(0, 0, /*max_duration_s=*/1), 0.2, 100);
  std::vector<std::string> reasons;
  for (int64_t f = 0; f < 75; ++f) {
    auto r = result(f, "person", 0.9f);
    if (auto c = t.update(r, r.pts_ns); c && c->type == "end") reasons.push_back(c->event.reason);
  }
  CHECK(reasons == std::vector<std::string>{"max_duration", "max_duration"});  // at 1 s and 2 s: 3 s of it
}

TEST_CASE("updates: every update_s, and at once when the peak rises by a tenth") {
  pipeline::RuleTracker t(rule(0), 0.2, /*update_s=*/1);
  std::vector<std::string> types;
  for (int64_t f = 0; f < 60; ++f) {
    auto r = result(f, "person", f == 40 ? 0.99f : 0.7f);
    if (auto c = t.update(r, r.pts_ns)) types.push_back(c->type + "@" + std::to_string(f));
  }
  CHECK(types == std::vector<std::string>{"new@0", "update@25", "update@40"});
}

TEST_CASE("a source whose timeline starts again ends the open event where it was") {
  pipeline::RuleTracker t(rule(0.2), 0.2, 100);
  const auto first = feed(t, repeat('p', 50), 200);
  REQUIRE(first == std::vector<std::string>{"new@205"});
  auto r = result(0, "person", 0.9f);  // the source restarted: frame times from 0 again
  const auto change = t.update(r, r.pts_ns);
  REQUIRE(change);
  CHECK(change->type == "end");
  CHECK(change->event.reason == "stream restarted");
  CHECK(change->event.end_ns == 249 * kFrameNs);
  // And the rule works on the new timeline (from the next frame).
  CHECK(feed(t, repeat('p', 10), 1) == std::vector<std::string>{"new@6"});
}

namespace {

pipeline::Packet packet(int64_t frame, bool key, size_t bytes) {
  pipeline::Packet p;
  p.buffer = std::shared_ptr<GstBuffer>(gst_buffer_new_allocate(nullptr, bytes, nullptr), [](GstBuffer* b) { gst_buffer_unref(b); });
  p.pts_ns = p.dts_ns = frame * kFrameNs;
  p.keyframe = key;
  p.bytes = bytes;
  return p;
}

}  // namespace

TEST_CASE("the packet ring keeps whole groups of pictures for keep_s, starts on a keyframe, and stays in its bytes") {
  gst_init(nullptr, nullptr);
  pipeline::PacketRing ring(/*keep_s=*/2, /*max_bytes=*/1 << 20);
  ring.push(packet(0, false, 100));  // no keyframe yet: a clip could not start here
  CHECK(ring.bytes() == 0);
  for (int64_t f = 1; f <= 250; ++f) ring.push(packet(f, f % 25 == 1, 1000));  // a keyframe a second
  const auto all = ring.since(INT64_MIN);
  REQUIRE(!all.empty());
  CHECK(all.front().keyframe);
  // 2 s back from the newest (250) is frame 200; the ring keeps from the keyframe at or before it (176).
  CHECK(all.front().pts_ns == 176 * kFrameNs);
  CHECK(all.back().pts_ns == 250 * kFrameNs);
  CHECK(ring.bytes() == all.size() * 1000);
  const auto from = ring.since(230 * kFrameNs);
  REQUIRE(!from.empty());
  CHECK(from.front().pts_ns == 226 * kFrameNs);
  CHECK(!ring.overflowed());

  pipeline::PacketRing small(/*keep_s=*/60, /*max_bytes=*/30'000);
  for (int64_t f = 1; f <= 250; ++f) small.push(packet(f, f % 25 == 1, 1000));
  CHECK(small.bytes() <= 30'000);
  CHECK(small.since(INT64_MIN).front().keyframe);
  CHECK(!small.overflowed());  // whole groups fit: the oldest went
  for (int64_t f = 251; f <= 300; ++f) small.push(packet(f, f == 251, 1000));  // one group of 50 000 bytes
  CHECK(small.overflowed());
  CHECK(small.bytes() <= 30'000);
}

TEST_CASE("retention deletes the oldest of what it recorded, nothing else, and remembers across restarts") {
  const auto dir = path("retention");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto make = [&](const std::string& name, size_t bytes) {
    const auto file = dir + "/" + name;
    std::ofstream(file) << std::string(bytes, 'x');
    return file;
  };
  const auto foreign = make("mine.mp4", 5000);  // the user's own file in the folder: never touched
  const double limit_gib = 2500.0 / 1073741824.0;
  {
    pipeline::Retention r(dir, 0, limit_gib);
    r.add(make("a.mp4", 1000));
    r.add(make("b.jpg", 1000));
    CHECK(r.enforce(0).empty());  // 2000 bytes: within the limit
  }
  pipeline::Retention again(dir, 0, limit_gib);  // a restart: the index is read back
  CHECK(again.bytes() == 2000);
  again.add(make("c.mp4", 1000));
  const auto deleted = again.enforce(0);
  CHECK(deleted == std::vector<std::string>{dir + "/a.mp4"});
  CHECK(!fs::exists(dir + "/a.mp4"));
  CHECK(fs::exists(dir + "/b.jpg"));
  CHECK(fs::exists(dir + "/c.mp4"));
  CHECK(fs::exists(foreign));
  // By age: everything it recorded is older than a day a week from now, and goes; the user's file stays.
  pipeline::Retention by_age(dir, 1, 0);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(by_age.enforce(now).empty());
  CHECK(by_age.enforce(now + 7 * 86400).size() == 2);
  CHECK(!fs::exists(dir + "/b.jpg"));
  CHECK(fs::exists(foreign));
  CHECK(pipeline::Retention(dir, 0, 0).bytes() == 0);
}

TEST_CASE("retention deletes only its own regular files, inside its folder: never what the index says otherwise") {
  const auto root = path("retention-safe");
  fs::remove_all(root);
  const auto dir = root + "/events", outside = root + "/outside";
  fs::create_directories(dir + "/cam");
  fs::create_directories(outside);
  std::ofstream(outside + "/precious.txt") << "keep me";
  std::ofstream(dir + "/cam/mine.mp4") << std::string(1000, 'x');
  std::ofstream(dir + "/cam/foreign.mp4") << "the user's";  // in the folder, never recorded
  fs::create_symlink(outside + "/precious.txt", dir + "/cam/link.jpg");  // recorded, then made a link by someone
  fs::create_directories(dir + "/sub");
  // An index as a damaged or hostile file might have it: absolute paths outside, "..", a link, a number for a path,
  // a line that is not JSON, a relative entry that is really the app's.
  std::ofstream(dir + "/index.jsonl") << nlohmann::json{{"path", outside + "/precious.txt"}, {"bytes", 7}, {"created", 0}}.dump() << "\n"
                                      << nlohmann::json{{"path", "../outside/precious.txt"}, {"bytes", 7}, {"created", 0}}.dump() << "\n"
                                      << nlohmann::json{{"path", "cam/../../outside/precious.txt"}, {"created", 0}}.dump() << "\n"
                                      << nlohmann::json{{"path", "cam/link.jpg"}, {"bytes", 7}, {"created", 0}}.dump() << "\n"
                                      << nlohmann::json{{"path", 5}, {"created", 0}}.dump() << "\n"
                                      << "{not json\n"
                                      << nlohmann::json{{"path", "sub"}, {"bytes", 1}, {"created", 0}}.dump() << "\n"
                                      << nlohmann::json{{"path", "cam/mine.mp4"}, {"bytes", 1000}, {"created", 0}}.dump() << "\n";
  // A restart reads it without failing; everything is older than a day: only the app's own file goes.
  pipeline::Retention r(dir, 1, 0);
  CHECK(r.skipped() == 5);
  const auto deleted = r.enforce(int64_t(std::time(nullptr)));
  CHECK(deleted == std::vector<std::string>{dir + "/cam/mine.mp4"});
  CHECK(slurp(outside + "/precious.txt") == "keep me");
  CHECK(fs::is_symlink(dir + "/cam/link.jpg"));  // a link is never followed, nor deleted
  CHECK(fs::exists(dir + "/cam/foreign.mp4"));
  CHECK(fs::is_directory(dir + "/sub"));
  // The index is written again with what is left to do: nothing.
  CHECK(pipeline::Retention(dir, 1, 0).skipped() == 0);
  CHECK(pipeline::Retention(dir, 1, 0).bytes() == 0);
  // What it records now is relative to the folder; a file elsewhere is refused; a failed write is an error.
  std::ofstream(dir + "/cam/next.mp4") << "y";
  r.add(dir + "/cam/next.mp4");
  CHECK(slurp(dir + "/index.jsonl").find("\"path\":\"cam/next.mp4\"") != std::string::npos);
  CHECK_THROWS_AS(r.add(outside + "/precious.txt"), IoError);
  fs::remove(dir + "/index.jsonl");
  fs::create_directories(dir + "/index.jsonl");  // (the index cannot be written)
  CHECK_THROWS_AS(r.add(dir + "/cam/next.mp4"), IoError);
  fs::remove_all(dir + "/index.jsonl");
}

TEST_CASE("a clip written to a full disk fails with the disk named, and takes nothing more") {
  gst_init(nullptr, nullptr);
  const auto packets = packets_of(make_video("clip-full-src.mkv", 30, 320, 240, 25, "matroskamux"));
  REQUIRE(packets.size() == 30);
  const auto clip = path("clip-full.mp4");
  fs::remove(clip);
  fs::create_symlink("/dev/full", clip);  // every write fails with ENOSPC
  {
    pipeline::ClipWriter writer(clip, packets.front().caps);
    for (const auto& p : packets) writer.push(p);
    writer.close();
    wait_until([&] { return writer.done(); });
    REQUIRE(writer.error());
    CAPTURE(*writer.error());
    CHECK(writer.error()->find(clip) != std::string::npos);
    CHECK(writer.error()->find("the disk is full") != std::string::npos);
  }
  fs::remove(clip);
}
