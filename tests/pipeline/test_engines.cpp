// Several engines in one run (inference.gpus), on the CPU: which engine each stream goes to (by expected decode load,
// sticky, re-balanced only as streams come and go), the batcher's lanes, a run spread over two engines that loses and
// repeats nothing, one engine's failure failing only its own streams, and engines started untuned switching to their
// tuned selves (inference.tune_in_background) without losing or repeating a frame.
#include <doctest/doctest.h>
#include <fmt/ranges.h>

#include <array>
#include <atomic>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/batching/gpu_assignment.hpp"
#include "pipeline/fake_classifier.hpp"
#include "pipeline/runner.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;
using namespace std::chrono_literals;
using pipeline::DecodeLoad;
using pipeline::GpuAssignment;

TEST_SUITE_BEGIN("engines");

TEST_CASE("decode cost: pixels x frame rate, weighted by what the codec costs NVDEC") {
  const DecodeLoad hd{1920, 1080, 30, "H.264"};
  CHECK(pipeline::decode_cost(hd) == doctest::Approx(1.0));
  CHECK(pipeline::decode_cost({3840, 2160, 30, "H.264"}) == doctest::Approx(4.0));
  CHECK(pipeline::decode_cost({1920, 1080, 60, "H.264"}) == doctest::Approx(2.0));
  CHECK(pipeline::decode_cost({1920, 1080, 30, "H.265"}) < pipeline::decode_cost(hd));
  CHECK(pipeline::decode_cost({1920, 1080, 30, ""}) < 0.1);   // raw video: nothing to decode
  CHECK(pipeline::decode_cost({0, 0, 0, "H.264"}) == doctest::Approx(1.0));  // not said: 1080p30
}

TEST_CASE("streams go to the engine with the least decoding to do, and stay there") {
  GpuAssignment a({0, 1});
  // A 4K stream weighs four 1080p ones: the next four go to the other GPU, then they alternate.
  CHECK(a.place(0, {3840, 2160, 30, "H.264"}).lane == 0);
  for (int s = 1; s <= 4; ++s) CHECK(a.place(s, {1920, 1080, 30, "H.264"}).lane == 1);
  CHECK(a.place(5, {1920, 1080, 30, "H.264"}).lane == 0);
  CHECK(a.place(6, {1920, 1080, 30, "H.264"}).lane == 1);
  // The same stream again (a reconnect, a file's next loop) keeps its engine whatever the loads are now.
  CHECK(a.place(0, {640, 360, 5, "H.264"}).lane == 0);
  CHECK(a.place(3, {3840, 2160, 60, "H.264"}).lane == 1);
  const auto loads = a.loads();
  CHECK(loads[0].streams == 2);
  CHECK(loads[1].streams == 5);
  CHECK(loads[0].load == doctest::Approx(5.0));
  CHECK(loads[1].load == doctest::Approx(5.0));
  // Equal loads: the engine with fewer streams, then the lowest index.
  GpuAssignment b({0, 1});
  CHECK(b.place(0, {1920, 1080, 30, "H.264"}).lane == 0);
  CHECK(b.place(1, {960, 1080, 30, "H.264"}).lane == 1);
  CHECK(b.place(2, {960, 1080, 30, "H.264"}).lane == 1);  // 1.0 vs 0.5: the lighter
  CHECK(b.place(3, {1920, 1080, 30, "H.264"}).lane == 0);  // 1.0 vs 1.0, one stream vs two
}

TEST_CASE("re-balancing happens as streams come and go: what leaves makes room, nothing running moves") {
  GpuAssignment a({0, 1, 2});
  for (int s = 0; s < 6; ++s) CHECK(a.place(s, {}).lane == s % 3);
  a.release(1);  // engine 1's stream 1 ends
  a.release(4);  // and its stream 4
  a.release(4);  // (twice: nothing more)
  a.release(99);  // never placed: nothing
  CHECK(!a.placed(1));
  CHECK(a.loads()[1].streams == 0);
  // The next two streams fill engine 1; the streams already running stay where they are.
  CHECK(a.place(10, {}).lane == 1);
  CHECK(a.place(11, {}).lane == 1);
  for (int s : {0, 3}) CHECK(a.placed(s)->lane == 0);
  for (int s : {2, 5}) CHECK(a.placed(s)->lane == 2);
  CHECK(a.place(12, {}).lane == 0);
  // A failed engine takes no more streams, unless every engine has failed.
  a.retire(1);
  CHECK(a.place(13, {}).lane == 2);
  CHECK(a.place(14, {}).lane != 1);
  a.retire(0);
  a.retire(2);
  CHECK(a.place(15, {}).lane >= 0);
  // An engine's GPU comes with its place: two engines may share a GPU.
  GpuAssignment same({0, 0});
  CHECK(same.place(0, {}).device == 0);
  CHECK(same.place(1, {}).lane == 1);
  CHECK(same.place(1, {}).device == 0);
}

TEST_CASE("the batcher's lanes: each engine takes only its own streams' frames; the end is everyone's") {
  pipeline::FrameHub hub({{8, false}, {8, false}, {8, false}}, 2);
  hub.set_lane(1, 1);
  CHECK(hub.lane(0) == 0);
  CHECK(hub.lane(1) == 1);
  const auto frame = [](int stream, int64_t index) {
    pipeline::Frame f;
    f.stream = stream;
    f.index = index;
    f.captured = pipeline::Clock::now();
    return f;
  };
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < 3; ++i) REQUIRE(hub.push(frame(s, i)));
  auto a = hub.pop_batch(16, 0us, 0ms, 0);
  auto b = hub.pop_batch(16, 0us, 0ms, 1);
  CHECK(a.size() == 6);
  for (const auto& f : a) CHECK(f.stream != 1);
  REQUIRE(b.size() == 3);
  for (const auto& f : b) CHECK(f.stream == 1);
  CHECK(hub.pop_batch(16, 0us, 0ms, 1).empty());  // nothing of lane 1's waits: it does not take lane 0's
  // Each lane reports its own drained streams; all_done is every lane's.
  hub.close(0);
  hub.close(1);
  auto d0 = hub.take_drained(0), d1 = hub.take_drained(1);
  CHECK(d0.streams == std::vector<int>{0});
  CHECK(d1.streams == std::vector<int>{1});
  CHECK(!d0.all_done);
  hub.close(2);
  d0 = hub.take_drained(0);
  d1 = hub.take_drained(1);
  CHECK(d0.streams == std::vector<int>{2});
  CHECK(d1.streams.empty());
  CHECK(d0.all_done);
  CHECK(d1.all_done);
  CHECK_THROWS_AS(hub.set_lane(0, 2), std::out_of_range);
}

namespace {

// Four files of `frames` frames, results to `jsonl`.
config::Config four_files(const std::string& tag, int frames, const std::string& jsonl) {
  std::string yaml = "inputs:\n";
  for (int i = 0; i < 4; ++i) {
    yaml += fmt::format("  - {{name: f{}, kind: file, path: '{}'}}\n", i, make_video(fmt::format("{}-{}.mkv", tag, i), frames, 160, 120,
                                                                                   25, "matroskamux"));
  }
  auto c = config::parse_config(yaml);
  c.output.results = jsonl;
  config::validate(c);
  return c;
}

std::vector<std::unique_ptr<inference::Classifier>> engines(std::vector<FakeClassifier*>& raw, size_t n) {
  std::vector<std::unique_ptr<inference::Classifier>> out;
  for (size_t i = 0; i < n; ++i) {
    auto e = std::make_unique<FakeClassifier>(2, 4);
    raw.push_back(e.get());
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

TEST_CASE("a run over two engines: the streams are spread, every frame classified once, each engine's share said") {
  const auto jsonl = path("engines-two.jsonl");
  auto c = four_files("engines-two", 30, jsonl);
  std::vector<FakeClassifier*> raw;
  pipeline::Runner runner(c, engines(raw, 2));
  // Neither engine takes a batch before every stream has been placed (a frame delivered): a stream that ended first
  // would give its load back and change where the last one goes.
  for (auto* e : raw) {
    e->before_batch = [&](int) {
      wait_until([&] {
        for (const auto& st : runner.control().streams()) {
          if (st->delivered == 0) return false;
        }
        return true;
      });
    };
  }
  std::atomic<int> stop{0};
  const auto summary = runner.run(stop);
  REQUIRE_MESSAGE(summary.code == ExitCode::kOk, fmt::format("{}", fmt::join(summary.problems, "; ")));
  std::map<std::string, std::vector<int64_t>> frames;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.contains("top")) frames[j["stream"]].push_back(j["frame"]);
  }
  for (int i = 0; i < 4; ++i) {
    const auto& f = frames[fmt::format("f{}", i)];
    REQUIRE(f.size() == 30);
    for (int k = 0; k < 30; ++k) CHECK(f[size_t(k)] == k);
  }
  // Equal streams: two on each engine, whichever order they started in.
  REQUIRE(summary.engines.size() == 2);
  std::map<int, int> per_engine;
  for (const auto& row : summary.streams) ++per_engine[row.engine];
  CHECK(per_engine == std::map<int, int>{{0, 2}, {1, 2}});
  for (const auto& e : summary.engines) {
    CHECK(e.streams == 2);
    CHECK(e.frames == 60);
    CHECK(e.failure.empty());
  }
  const auto table = pipeline::format_summary(summary);
  CHECK(table.find("engine 0 (fake engine): 2 stream(s), 60 frames") != std::string::npos);
  CHECK(table.find("engine 1 (fake engine): 2 stream(s), 60 frames") != std::string::npos);
  const auto info = runner.control().engines();
  REQUIRE(info.size() == 2);
  CHECK(info[0].stats->frames + info[1].stats->frames == 120);
}

TEST_CASE("one engine's failure fails only its streams; the others finish whole, and the exit code says it") {
  const auto jsonl = path("engines-fail.jsonl");
  auto c = four_files("engines-fail", 40, jsonl);
  std::vector<FakeClassifier*> raw;
  pipeline::Runner runner(c, engines(raw, 2));
  raw[1]->before_batch = [](int batch) {
    if (batch == 2) throw UnavailableError("the GPU has fallen off the bus (Xid 79)");
  };
  std::atomic<int> stop{0};
  const auto summary = runner.run(stop);
  CHECK(summary.code == ExitCode::kUnavailable);
  REQUIRE(summary.engines.size() == 2);
  CHECK(summary.engines[0].failure.empty());
  CHECK(summary.engines[1].failure.find("engine 1 failed: the GPU has fallen off the bus (Xid 79)") != std::string::npos);
  int failed = 0, whole = 0;
  std::map<std::string, int64_t> results;
  std::set<std::string> ended;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.contains("top")) ++results[j["stream"]];
    if (j.value("event", "") == "stream_end") ended.insert(j["stream"].get<std::string>());
  }
  for (const auto& row : summary.streams) {
    CAPTURE(row.name);
    CHECK(ended.count(row.name) == 1);  // every stream's end is said, failed or not
    if (row.engine == 1) {
      ++failed;
      CHECK(row.status == "failed");
      CHECK(row.error.find("engine 1 failed") != std::string::npos);
    } else {
      ++whole;
      CHECK(row.status == "ok");
      CHECK(results[row.name] == 40);
    }
  }
  CHECK(failed >= 1);
  CHECK(whole >= 2);
  CHECK(pipeline::format_summary(summary).find("FAILED: engine 1 failed") != std::string::npos);
  CHECK(runner.control().engines()[1].failure.find("Xid 79") != std::string::npos);
}

namespace {

// An engine whose batches fail when they are collected (as a GPU fault shows itself: at the wait for the batch).
class FailingCollect final : public inference::Classifier {
 public:
  explicit FailingCollect(int fail_at) : fail_at_(fail_at) { num_classes_ = 10; }
  std::string engine_name() const override { return "failing"; }
  int max_batch() const override { return 4; }
  int max_in_flight() const override { return 2; }
  void submit(std::span<const inference::FrameView> frames) override { pending_.push_back(frames.size()); }
  bool ready() override { return false; }
  void collect(std::vector<float>& logits) override {
    if (++collected_ >= fail_at_) throw UnavailableError("an illegal memory access was encountered (Xid 13)");
    logits.assign(pending_.front() * 10, 0.f);
    pending_.erase(pending_.begin());
  }

 private:
  int fail_at_, collected_ = 0;
  std::vector<size_t> pending_;
};

}  // namespace

TEST_CASE("an engine that fails as a batch is collected: that batch's streams still end; all engines failed ends the run") {
  const auto jsonl = path("engines-collect.jsonl");
  auto c = four_files("engines-collect", 40, jsonl);
  std::vector<std::unique_ptr<inference::Classifier>> two;
  two.push_back(std::make_unique<FakeClassifier>(2, 4));
  two.push_back(std::make_unique<FailingCollect>(2));
  pipeline::Runner runner(c, std::move(two));
  std::atomic<int> stop{0};
  const auto summary = runner.run(stop);
  CHECK(summary.code == ExitCode::kUnavailable);
  std::set<std::string> ended;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.value("event", "") == "stream_end") ended.insert(j["stream"].get<std::string>());
  }
  CHECK(ended.size() == 4);  // every stream's end is said, the failed engine's too
  for (const auto& row : summary.streams) CHECK((row.engine == 0 ? row.status == "ok" : row.status == "failed"));
  // Both engines failing: the run ends with the error, as with one engine.
  auto c2 = four_files("engines-all", 40, path("engines-all.jsonl"));
  std::vector<std::unique_ptr<inference::Classifier>> both;
  both.push_back(std::make_unique<FailingCollect>(2));
  both.push_back(std::make_unique<FailingCollect>(2));
  pipeline::Runner all(c2, std::move(both));
  CHECK_THROWS_WITH_AS(all.run(stop), doctest::Contains("Xid 13"), UnavailableError);
}

TEST_CASE("engines started untuned switch to their tuned selves between two batches: no frame lost or classified twice") {
  const auto jsonl = path("engines-tune.jsonl");
  auto c = config::parse_config(
      "inputs:\n"
      "  - {name: a, kind: test, pattern: ball, fps: 30, width: 160, height: 120, drop: block}\n"
      "  - {name: b, kind: test, pattern: smpte, fps: 30, width: 160, height: 120, drop: block}\n");
  c.output.results = jsonl;
  config::validate(c);
  // Two lanes (one stream each), each engine untuned (its top-1 class-1); its tuned self (class-2) is built only once
  // both untuned engines have classified three batches, so that frames of both kinds exist.
  std::array<FakeClassifier*, 2> untuned{};
  std::array<std::atomic<FakeClassifier*>, 2> tuned{};
  std::vector<std::unique_ptr<inference::Classifier>> two;
  for (size_t i = 0; i < 2; ++i) {
    auto e = std::make_unique<FakeClassifier>(2, 4);
    e->fixed_class = 1;
    e->tuned_self = [&, i](const std::atomic<bool>&) -> std::unique_ptr<inference::Classifier> {
      wait_until([&] { return untuned[0]->batches() >= 3 && untuned[1]->batches() >= 3; });
      auto t = std::make_unique<FakeClassifier>(2, 4);
      t->fixed_class = 2;
      tuned[i] = t.get();
      return t;
    };
    untuned[i] = e.get();
    two.push_back(std::move(e));
  }
  pipeline::Runner runner(c, std::move(two));
  CHECK(!runner.control().models().at(0).tuned);
  std::atomic<int> stop{0};
  pipeline::RunSummary summary;
  std::thread run([&] { summary = runner.run(stop); });
  wait_until([&] { return runner.control().models().at(0).tuned; });
  wait_until([&] { return tuned[0] && tuned[1] && tuned[0].load()->batches() >= 3 && tuned[1].load()->batches() >= 3; });
  stop = 1;
  run.join();
  REQUIRE_MESSAGE(summary.code == ExitCode::kOk, fmt::format("{}", fmt::join(summary.problems, "; ")));
  const auto model = runner.control().models().at(0);
  CHECK(model.tuned_after_s > 0);
  CHECK(model.history.empty());  // (not a deploy: nothing to roll back to)
  // Per stream: every frame once, in order; class-1 up to one frame, class-2 from the next on.
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> seen;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.contains("top")) seen[j["stream"]].emplace_back(j["frame"], j["top"][0]["label"]);
  }
  for (const auto* name : {"a", "b"}) {
    const auto& lines = seen[name];
    REQUIRE(!lines.empty());
    size_t switched = 0;
    for (size_t k = 0; k < lines.size(); ++k) {
      REQUIRE_MESSAGE(lines[k].first == int64_t(k), name, ": a frame skipped or classified twice around the switch");
      if (k > 0 && lines[k].second != lines[k - 1].second) ++switched;
    }
    CHECK(lines.front().second == "class-1");
    CHECK(lines.back().second == "class-2");
    CHECK_MESSAGE(switched == 1, name, ": the labels went back and forth");
  }
}

TEST_CASE("a tuned engine whose build failed is built once more after a pause, and the run switches to it") {
  const auto jsonl = path("engines-tune-retry.jsonl");
  auto c = config::parse_config("inputs:\n  - {name: a, kind: test, pattern: ball, fps: 30, width: 160, height: 120, drop: block}\n");
  c.output.results = jsonl;
  config::validate(c);
  auto e = std::make_unique<FakeClassifier>(2, 4);
  e->fixed_class = 1;
  std::atomic<int> builds{0};
  std::atomic<FakeClassifier*> tuned{nullptr};
  e->tuned_self = [&](const std::atomic<bool>&) -> std::unique_ptr<inference::Classifier> {
    if (++builds == 1) throw InternalError("cuDNN has no usable algorithm for layer1.0.conv2 (batch 32)");
    auto t = std::make_unique<FakeClassifier>(2, 4);
    t->fixed_class = 2;
    tuned = t.get();
    return t;
  };
  pipeline::Runner runner(c, std::move(e));
  std::atomic<int> stop{0};
  pipeline::RunSummary summary;
  std::thread run([&] { summary = runner.run(stop); });
  wait_until([&] { return runner.control().models().at(0).tuned; });
  wait_until([&] { return tuned.load() && tuned.load()->batches() >= 2; });
  stop = 1;
  run.join();
  REQUIRE(summary.code == ExitCode::kOk);
  CHECK(builds == 2);
  CHECK(runner.control().models().at(0).tuned_after_s >= 5);  // (the second build came after the pause)
  std::vector<std::pair<int64_t, std::string>> lines;
  for (const auto& j : read_jsonl(jsonl)) {
    if (j.contains("top")) lines.emplace_back(j["frame"], j["top"][0]["label"]);
  }
  REQUIRE(!lines.empty());
  for (size_t k = 0; k < lines.size(); ++k) REQUIRE(lines[k].first == int64_t(k));  // every frame once, in order
  CHECK(lines.front().second == "class-1");
  CHECK(lines.back().second == "class-2");
}

TEST_CASE("a run that ends before its tuned engine is built gives the build up: it never waits for it") {
  const auto jsonl = path("engines-tune-cancel.jsonl");
  auto c = four_files("engines-tune-cancel", 10, jsonl);
  auto e = std::make_unique<FakeClassifier>(2, 4);
  std::atomic<bool> cancelled{false};
  e->tuned_self = [&](const std::atomic<bool>& cancel) -> std::unique_ptr<inference::Classifier> {
    wait_until([&] { return cancel.load(); });  // (a build that would take longer than the run)
    cancelled = true;
    throw InternalError("cuDNN engine: its build was cancelled");
  };
  pipeline::Runner runner(c, std::move(e));
  std::atomic<int> stop{0};
  const auto summary = runner.run(stop);
  CHECK(summary.code == ExitCode::kOk);
  CHECK(cancelled);
  CHECK(!runner.control().models().at(0).tuned);
  CHECK(frame_lines(jsonl) == 40);  // every frame, by the untuned engine
}

TEST_CASE("inference.gpus: a list of GPUs or all; bad values are refused with the key") {
  auto c = config::parse_config("inference: {gpus: [0, 1, 1]}\n");
  CHECK(c.inference.gpus == std::vector<int>{0, 1, 1});
  CHECK(!c.inference.all_gpus);
  c = config::parse_config("inference: {gpus: all}\n");
  CHECK(c.inference.all_gpus);
  CHECK(c.inference.gpus.empty());
  config::apply_override(c, "inference.gpus=[]");
  CHECK(!c.inference.all_gpus);
  CHECK_THROWS_WITH(config::parse_config("inference: {gpus: [0, 64]}\n"), doctest::Contains("inference.gpus[1]: 64 is out of range"));
  CHECK_THROWS_WITH(config::parse_config("inference: {gpus: some}\n"), doctest::Contains("expected a list of GPU numbers"));
  CHECK_THROWS_WITH(config::parse_config("inference: {gpus: [zero]}\n"), doctest::Contains("inference.gpus[0]"));
}

TEST_SUITE_END();
