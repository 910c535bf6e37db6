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

  // The model on the train split, through the app: every image scored, each by its folder's label.
  r = run_command(app("evaluate --images '" + dataset + "/train'"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const auto train = images_in(dataset + "/train");
  CHECK(r.output.find("images scored: " + std::to_string(train)) != std::string::npos);
  CHECK(r.output.find("image accuracy: ") != std::string::npos);
  CHECK(r.output.find("confusion matrix") != std::string::npos);

  // Mistakes are said.
  CHECK(run_command(app("capture --input test --dataset '" + dataset + "' --label a/b --max 1")).code == 64);
  CHECK(run_command(app("capture --input test --dataset '" + dataset + "' --label x --split train --max 1")).code == 64);
  CHECK(run_command(app("evaluate --images '" + path("no-such-folder") + "'")).code == 66);
  CHECK(run_command(app("evaluate")).code == 64);
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

TEST_SUITE_END();
