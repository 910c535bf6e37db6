// `capture` and `evaluate --images`: frames of a video and of a live source saved into an image-folder dataset (splits
// by blocks of stream time, no near-copies across splits, labels.txt and the manifest), then the model scored on a
// split through the app's own pipeline.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("capture");

namespace {

std::vector<nlohmann::json> manifest(const std::string& dataset) { return read_jsonl(dataset + "/manifest.jsonl"); }

int64_t images_in(const std::string& folder) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(folder, ec)) n += e.path().extension() == ".jpg";
  return n;
}

}  // namespace

TEST_CASE("capture: a video's frames into train and val by blocks of time, never neighbours across splits") {
  const auto video = make_video("capture-src.mp4", 250, 320, 240, 25);  // 10 s
  const auto dataset = path("dataset-video");
  fs::remove_all(dataset);
  auto r = run_command(app("capture --input '" + video + "' --dataset '" + dataset +
                           "' --label ball --fps 5 --split train=0.5,val=0.5 --block 1"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto items = manifest(dataset);
  // 5 per second over 10 s, less the frames in the first half second after each change of split (the blocks alternate
  // at first: up to 3 of each 5).
  CHECK(items.size() >= 20);
  CHECK(items.size() <= 50);
  CHECK(r.output.find("captured " + std::to_string(items.size()) + " frame(s) of 'ball'") != std::string::npos);
  CHECK(images_in(dataset) == int64_t(items.size()));
  std::map<std::string, int> per_split;
  std::map<int64_t, std::string> split_of_second;
  for (const auto& j : items) {
    CHECK(fs::exists(dataset + "/" + j["file"].get<std::string>()));
    CHECK(j["label"] == "ball");
    CHECK(j["file"].get<std::string>().rfind(j["split"].get<std::string>() + "/ball/", 0) == 0);
    ++per_split[j["split"]];
    const auto second = int64_t(j["t"].get<double>());  // a block: one split
    auto [it, fresh] = split_of_second.try_emplace(second, j["split"]);
    CHECK(it->second == j["split"]);
  }
  CHECK(per_split.size() == 2);
  CHECK(per_split["train"] >= 10);
  CHECK(per_split["val"] >= 10);
  // Frames on either side of a change of split are at least half a second apart.
  for (size_t i = 1; i < items.size(); ++i) {
    if (items[i]["split"] != items[i - 1]["split"]) CHECK(items[i]["t"].get<double>() - items[i - 1]["t"].get<double>() >= 0.5);
  }
  CHECK(slurp(dataset + "/labels.txt") == "ball\n");

  // A second label into the same dataset, from a live source, up to a count: labels.txt holds both, sorted.
  r = run_command(app("capture --input test:smpte --dataset '" + dataset + "' --label bars --max 6 --every 3 --block 0.5"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(slurp(dataset + "/labels.txt") == "ball\nbars\n");
  CHECK(manifest(dataset).size() == items.size() + 6);

  // The model on the train split, through the app: every image scored, each by its folder's label. A model that does
  // not know the folders' labels is a usage error naming both sets (not 0 % and exit 0).
  r = run_command(app("evaluate --images '" + dataset + "/train'"));
  CHECK(r.code == 64);
  CHECK_MESSAGE(r.output.find("ball, bars") != std::string::npos, r.output);
  CHECK(r.output.find("class-0, class-1") != std::string::npos);
  CHECK(r.output.find("--model") != std::string::npos);
  const auto labels = path("capture-labels.txt");
  std::ofstream(labels) << "ball\nbars\nclass-2\nclass-3\nclass-4\nclass-5\nclass-6\nclass-7\nclass-8\nclass-9\n";
  r = run_command(app("evaluate --images '" + dataset + "/train' --set model.labels='" + labels + "'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto train = images_in(dataset + "/train");
  CHECK(r.output.find("images scored: " + std::to_string(train)) != std::string::npos);
  CHECK(r.output.find("image accuracy: ") != std::string::npos);
  CHECK(r.output.find("confusion matrix") != std::string::npos);

  // Mistakes are said; without an input it says what to give, and --help lists its own options with examples.
  r = run_command(app("capture --dataset '" + dataset + "' --label x --max 1"));
  CHECK(r.code == 64);
  CHECK(r.output.find("give --input") != std::string::npos);
  r = run_command(app("capture --help"));
  CHECK(r.code == 0);
  CHECK(r.output.find("--fps") != std::string::npos);
  CHECK(r.output.find("capture --input /dev/video0 --dataset mine --label mug") != std::string::npos);
  CHECK(run_command(app("capture --input test --dataset '" + dataset + "' --label a/b --max 1")).code == 64);
  CHECK(run_command(app("capture --input test --dataset '" + dataset + "' --label x --split train --max 1")).code == 64);
  CHECK(run_command(app("evaluate --images '" + path("no-such-folder") + "'")).code == 66);
  CHECK(run_command(app("evaluate")).code == 64);
}

TEST_CASE("capture says how far it has come while it goes, and Ctrl-C leaves what it wrote whole") {
  const auto dataset = path("dataset-progress");
  fs::remove_all(dataset);
  // A live pattern for 6 s of its own time (= wall time): off a terminal, a line at the start and one every 5 s.
  auto r = run_command(app("capture --input test:ball --set input.fps=10 --dataset '" + dataset + "' --label ball --fps 2 --to 6"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("capture: frames of test:ball as 'ball' into") != std::string::npos);
  size_t lines = 0;
  for (auto at = r.output.find("image(s) of 'ball'"); at != std::string::npos; at = r.output.find("image(s) of 'ball'", at + 1)) {
    ++lines;
  }
  CHECK(lines >= 3);  // at the start, at 5 s, at the end
  // Interrupted: what was saved is in the manifest, line by line.
  const auto stopped = path("dataset-stopped");
  fs::remove_all(stopped);
  r = run_command("(exec " + app_direct("capture --input test:ball --set input.fps=10 --dataset '" + stopped +
                                        "' --label ball --fps 5") + ") & pid=$!; for i in $(seq 600); do [ \"$(cat '" + stopped +
                      "/manifest.jsonl' 2>/dev/null | wc -l)\" -ge 3 ] && break; kill -0 $pid 2>/dev/null || break; "
                      "sleep 0.1; done; kill -INT $pid; wait $pid");  // (a capture that died early: its own code)
  CHECK_MESSAGE(r.code == 0, r.output);
  const auto items = manifest(stopped);
  CHECK(items.size() >= 3);
  CHECK(images_in(stopped) == int64_t(items.size()));
}

TEST_CASE("output.collect keeps the frames the model is unsure about, at most so many per minute of stream time") {
  const auto video = make_video("collect-src.mp4", 250, 160, 120, 25);  // 10 s
  const auto dir = path("collected");
  fs::remove_all(dir);
  // Every frame is below 101 %: one every 2 s of stream time is kept (30 a minute), 5 in all, whatever the speed.
  auto r = run_command(app("--input '" + video + "' --output none --set output.collect.dir='" + dir +
                           "' --set output.collect.below_confidence=1 --set output.collect.max_per_minute=30 --log-level info"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto lines = read_jsonl(dir + "/collect.jsonl");
  REQUIRE(lines.size() == 5);
  std::set<int64_t> frames;
  for (const auto& j : lines) {
    CHECK(fs::exists(dir + "/" + j["file"].get<std::string>()));
    CHECK(j["file"].get<std::string>().find(j["label"].get<std::string>()) != std::string::npos);  // in its label's folder
    CHECK(j["score"].get<double>() < 1.0);
    CHECK(j["top"].size() >= 2);
    frames.insert(j["frame"].get<int64_t>());
  }
  CHECK(frames == std::set<int64_t>{0, 50, 100, 150, 200});
  CHECK(images_in(dir) == 5);
  CHECK(r.output.find("collected: 5 frame(s) below 100% confidence kept for review in") != std::string::npos);
  // Sure enough (below 0 %: never): nothing kept.
  fs::remove_all(dir);
  r = run_command(app("--input '" + video + "' --output none --set output.collect.dir='" + dir +
                      "' --set output.collect.below_confidence=0"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(images_in(dir) == 0);
}

TEST_CASE("capture --region saves the region alone (the input's, or --box's): what its model will classify") {
  const auto dataset = path("dataset-region");
  fs::remove_all(dataset);
  // A region of the input's, by name, from the config.
  const auto cfg = path("capture-region.yaml");
  std::ofstream(cfg) << "input: {kind: test, pattern: smpte75, width: 320, height: 240, fps: 10,\n"
                        "        regions: [{name: gate, box: [0.5, 0.25, 0.25, 0.5]}]}\n";
  auto r = run_command(app("capture --config '" + cfg + "' --region gate --dataset '" + dataset + "' --label closed --max 4"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  auto items = manifest(dataset);
  REQUIRE(items.size() == 4);
  for (const auto& j : items) {
    CHECK(j["region"] == "gate");
    CHECK(j["box"] == nlohmann::json({160, 60, 80, 120}));
  }
  // Its picture is the box's size.
  const auto probe = run_command("gst-discoverer-1.0 '" + dataset + "/" + items[0]["file"].get<std::string>() + "'");
  CHECK(probe.output.find("Width: 80") != std::string::npos);
  CHECK(probe.output.find("Height: 120") != std::string::npos);
  // A box given on the command line; an unknown region is a usage error naming the input's.
  r = run_command(app("capture --input test:ball --box 10,10,64,32 --dataset '" + dataset + "' --label open --max 2"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  items = manifest(dataset);
  CHECK(items.back()["box"] == nlohmann::json({10, 10, 64, 32}));
  r = run_command(app("capture --config '" + cfg + "' --region door --dataset '" + dataset + "' --label open --max 2"));
  CHECK(r.code == 64);
  CHECK(r.output.find("the input has no region 'door' (it has gate)") != std::string::npos);
}

TEST_SUITE_END();
