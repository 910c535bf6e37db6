// Teaching a model from the page, the service's side (the app on the CPU engine, driven with curl): the frames
// output.collect keeps wait for review within output.collect.max_frames (the oldest dropped first, counted); labelled
// in bulk they move into the model's dataset (DATASET/SPLIT/LABEL/, splits by blocks of stream time, a manifest
// line each), discarded they go; "capture now" saves a stream's frame or region under a label; a training job runs
// one at a time and is cancelled or fails without leaving a candidate behind. (Training for real, with PyTorch, and
// the page: tests/service/teach_page_test.py.)
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "service/service_helpers.hpp"

using namespace vc;
using namespace vc::test;
using json = nlohmann::json;

TEST_SUITE_BEGIN("teach");

namespace {

int64_t count_lines(const std::string& file) {
  std::ifstream in(file);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// A stand-in for tools/train.py with its --progress protocol (the real one is tested with PyTorch elsewhere): it
// reports a start and a batch, then fails at once (VC_FAKE_FAIL) or works until it is stopped.
void write_fake_trainer(const std::string& file) {
  std::ofstream(file) << R"PY(import json, os, sys, time
args, rest = {}, sys.argv[1:]
while rest:
    key = rest.pop(0)
    if "=" in key:
        key, value = key.split("=", 1)
    else:
        value = rest.pop(0)
    args[key] = value
assert os.getppid() == int(args["--parent-pid"]) and "--compare" in args
def say(**line):
    with open(args["--progress"], "a") as f:
        f.write(json.dumps(line) + "\n")
say(event="start", arch="resnet18", device="cpu", classes=2, labels=["ball", "dark"], train=8, val=2,
    epochs=int(args["--epochs"]))
say(event="batch", epoch=1, epochs=int(args["--epochs"]), done=4, total=8, loss=0.7, eta_s=30)
if os.path.exists(os.path.join(args["--data"], "fail")):
    say(event="error", message="too few training images: dark (1)")
    sys.exit(65)
open(args["--out"] + ".part", "w").write("half a model")
while True:
    time.sleep(0.05)
)PY";
}

}  // namespace

TEST_CASE("the review queue: bounded, labelled in bulk into the dataset, discarded; capture now; one training job") {
  Service svc("teach");
  const auto labels = path("labels.txt");
  write_fake_trainer(svc.dir() + "/fake_train.py");
  svc.write_config("model: {weights: '" + fixture("basic_narrow.safetensors") + "', labels: '" + labels +
                   "', input_size: 64}\n"
                   "inputs:\n  - {name: cam, kind: test, pattern: ball, fps: 10, width: 160, height: 120, max_frames: 40, "
                   "drop: block}\n"
                   "output:\n  collect: {dir: review, below_confidence: 1.0, max_per_minute: 6000, max_frames: 30}\n"
                   "teach: {datasets_dir: datasets, models_dir: trained, block_s: 0.2, trainer: fake_train.py}\n",
                   "  rate_per_s: 1000\n");  // (many changes in a row)
  svc.start();
  // Every frame is below 100 % and kept (one per 10 ms of stream time at most: all 40); 30 wait, the 10 oldest dropped.
  json summary;
  for (int i = 0; i < 300; ++i) {
    summary = svc.get("/api/v1/datasets").parsed();
    if (svc.stream("cam")["state"] == "ended" && summary["review"]["waiting"].get<int64_t>() +
                                                       summary["review"]["dropped_for_room"].get<int64_t>() >= 40) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(summary.dump());
  REQUIRE(summary["review"]["waiting"] == 30);
  CHECK(summary["review"]["dropped_for_room"] == 10);
  CHECK(summary["collecting"] == true);

  auto queue = svc.get("/api/v1/datasets/review").parsed();
  REQUIRE(queue["items"].size() == 30);
  CHECK(queue["items"][0]["frame"] == 39);  // newest first
  CHECK(queue["items"][29]["frame"] == 10);
  CHECK(queue["items"][0]["model"] == "default");
  CHECK(queue["items"][0]["top"].size() >= 2);
  const auto image = svc.get(queue["items"][0]["image"].get<std::string>());
  CHECK(image.status == 200);
  CHECK(image.body.substr(0, 2) == "\xFF\xD8");
  CHECK(svc.get("/api/v1/datasets/review/../service.yaml").status == 404);
  CHECK(svc.get("/api/v1/datasets/review/nothing.jpg").status == 404);

  // Twelve labelled at once: moved into datasets/default/SPLIT/ball/, recorded, gone from the queue.
  json twelve = json::array();
  for (int i = 0; i < 12; ++i) twelve.push_back(queue["items"][i]["file"]);
  CHECK(svc.request("POST", "/api/v1/datasets/review/label", json{{"items", twelve}, {"label", "ball"}}.dump(), "").status == 401);
  CHECK(svc.request("POST", "/api/v1/datasets/review/label", json{{"items", twelve}, {"label", "a/b"}}.dump()).status == 422);
  CHECK(svc.request("POST", "/api/v1/datasets/review/label", json{{"items", twelve}}.dump()).status == 422);
  CHECK(svc.request("POST", "/api/v1/datasets/review/label",
                    json{{"items", twelve}, {"label", "ball"}, {"dataset", "nope"}}.dump()).status == 404);
  auto r = svc.request("POST", "/api/v1/datasets/review/label", json{{"items", twelve}, {"label", "ball"}}.dump());
  REQUIRE_MESSAGE(r.status == 200, r.body);
  const auto labelled = r.parsed();
  CHECK(labelled["labelled"].size() == 12);
  CHECK(labelled["missing"].empty());
  std::set<std::string> splits;
  for (const auto& line : labelled["labelled"]) {
    CHECK(line["label"] == "ball");
    CHECK(fs::is_regular_file(svc.dir() + "/datasets/default/" + line["file"].get<std::string>()));
    CHECK(line["file"].get<std::string>().starts_with(line["split"].get<std::string>() + "/ball/"));
    splits.insert(line["split"].get<std::string>());
  }
  CHECK(splits == std::set<std::string>{"train", "val"});  // (4 s of frames in 0.2 s blocks: both splits)
  CHECK(count_lines(svc.dir() + "/datasets/default/manifest.jsonl") == 12);
  CHECK(svc.file("datasets/default/labels.txt") == "ball\n");
  // Labelled already: not there to label again.
  CHECK(svc.request("POST", "/api/v1/datasets/review/label", json{{"items", twelve}, {"label", "dark"}}.dump()).status == 409);

  // Lines a person or another program wrote into the index: nothing outside the queue's files, no wrong type, throws.
  fs::create_directories(svc.dir() + "/review/x");
  fs::copy_file(svc.dir() + "/review/" + queue["items"][20]["file"].get<std::string>(), svc.dir() + "/review/x/odd.jpg.tmp");
  {
    std::ofstream(svc.dir() + "/outside.jpg") << "not in the queue";
    std::ofstream index(svc.dir() + "/review/collect.jsonl", std::ios::app);
    index << R"({"file": ")" << svc.dir() << R"(/outside.jpg"})" << "\n"
          << R"({"file": "../outside.jpg"})" << "\n" << R"({"file": "collect.jsonl"})" << "\n" << "{not json\n"
          << R"({"file": "x/odd.jpg", "model": 5, "pts": 1e308, "t": "x", "label": [1], "frame": "x", "score": null})" << "\n";
  }
  fs::rename(svc.dir() + "/review/x/odd.jpg.tmp", svc.dir() + "/review/x/odd.jpg");
  auto with_odd = svc.get("/api/v1/datasets/review").parsed();
  REQUIRE(with_odd["items"].size() == 19);  // the 18 left and x/odd.jpg, the newest line
  CHECK(with_odd["items"][0]["file"] == "x/odd.jpg");
  CHECK(svc.get("/api/v1/datasets").status == 200);
  CHECK(svc.get("/api/v1/datasets/review/collect.jsonl").status == 404);
  for (const auto* bad : {"../outside.jpg", "collect.jsonl"}) {
    CHECK(svc.request("POST", "/api/v1/datasets/review/discard", json{{"items", {bad}}}.dump()).parsed()["discarded"] == 0);
  }
  CHECK(fs::exists(svc.dir() + "/outside.jpg"));
  CHECK(fs::exists(svc.dir() + "/review/collect.jsonl"));
  r = svc.request("POST", "/api/v1/datasets/review/label", json{{"items", {"x/odd.jpg"}}, {"label", "ball"}}.dump());
  CHECK_MESSAGE(r.status == 200, r.body);

  json three = json::array({queue["items"][12]["file"], queue["items"][13]["file"], queue["items"][14]["file"]});
  r = svc.request("POST", "/api/v1/datasets/review/discard", json{{"items", three}}.dump());
  CHECK(r.status == 200);
  CHECK(r.parsed()["discarded"] == 3);
  summary = svc.get("/api/v1/datasets").parsed();
  CHECK(summary["review"]["waiting"] == 15);
  const auto& data = summary["datasets"][0];
  CHECK(data["name"] == "default");
  CHECK(data["images"] == 13);
  CHECK(data["labels"]["ball"]["train"].get<int>() + data["labels"]["ball"]["val"].get<int>() == 13);

  // Capture now: a new stream's current frame, and one region of it, under a label.
  REQUIRE(svc.add({{"name", "door"}, {"kind", "test"}, {"pattern", "snow"}, {"fps", 10}, {"width", 160}, {"height", 120},
                   {"regions", json::array({{{"name", "knob"}, {"box", {10, 20, 40, 30}}}})}, {"whole", true}})
              .status == 201);
  svc.wait_frames("door", 2);
  r = svc.request("POST", "/api/v1/datasets/default/capture", json{{"stream", "door"}, {"label", "dark"}}.dump());
  REQUIRE_MESSAGE(r.status == 201, r.body);
  CHECK(r.parsed()["label"] == "dark");
  CHECK(fs::is_regular_file(svc.dir() + "/datasets/default/" + r.parsed()["file"].get<std::string>()));
  r = svc.request("POST", "/api/v1/datasets/default/capture", json{{"stream", "door"}, {"region", "knob"}, {"label", "dark"}}.dump());
  REQUIRE_MESSAGE(r.status == 201, r.body);
  CHECK(r.parsed()["box"] == json::array({10, 20, 40, 30}));
  CHECK(svc.request("POST", "/api/v1/datasets/default/capture", json{{"stream", "nope"}, {"label", "dark"}}.dump()).status == 404);
  CHECK(svc.request("POST", "/api/v1/datasets/default/capture", json{{"stream", "door"}, {"region", "x"}, {"label", "dark"}}.dump()).status == 404);
  CHECK(svc.request("POST", "/api/v1/datasets/nope/capture", json{{"stream", "door"}, {"label", "dark"}}.dump()).status == 404);
  CHECK(svc.file("datasets/default/labels.txt") == "ball\ndark\n");
  CHECK(count_lines(svc.dir() + "/datasets/default/manifest.jsonl") == 15);

  // Training: one job at a time; cancelled, it leaves no candidate; failed, it says why.
  CHECK(svc.request("POST", "/api/v1/models/nope/train", "{}").status == 404);
  CHECK(svc.request("POST", "/api/v1/models/default/train", R"({"epochs": 0})").status == 422);
  CHECK(svc.get("/api/v1/models/default/train").status == 404);
  r = svc.request("POST", "/api/v1/models/default/train", R"({"epochs": 3, "min_per_class": 1})");
  REQUIRE_MESSAGE(r.status == 202, r.body);
  const auto candidate = r.parsed()["candidate"].get<std::string>();
  CHECK(r.parsed()["state"] == "running");
  CHECK(svc.request("POST", "/api/v1/models/default/train", "{}").status == 409);
  json job;
  for (int i = 0; i < 100 && !(job = svc.get("/api/v1/models/default/train").parsed()).contains("progress"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(job["state"] == "running");
  CHECK(job["progress"]["eta_s"] == 30);
  CHECK(job["setup"]["epochs"] == 3);
  CHECK(svc.request("DELETE", "/api/v1/models/default/train", "", "").status == 401);
  r = svc.request("DELETE", "/api/v1/models/default/train");
  REQUIRE_MESSAGE(r.status == 200, r.body);
  CHECK(r.parsed()["state"] == "cancelled");
  CHECK_FALSE(fs::exists(candidate));
  CHECK_FALSE(fs::exists(candidate + ".part"));
  CHECK(svc.request("DELETE", "/api/v1/models/default/train").status == 404);

  std::ofstream(svc.dir() + "/datasets/default/fail") << "";
  r = svc.request("POST", "/api/v1/models/default/train", "{}");
  REQUIRE_MESSAGE(r.status == 202, r.body);
  for (int i = 0; i < 100 && (job = svc.get("/api/v1/models/default/train").parsed())["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(job["state"] == "failed");
  CHECK(job["exit_code"] == 65);
  CHECK(job["error"] == "too few training images: dark (1)");
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["history"].empty());  // nothing deployed by training
  CHECK(svc.stop() == 0);
}

TEST_CASE("a model deployed over the API is the one a restart loads, until the config names other weights") {
  Service svc("deployed");  // (the app's test command line names basic_narrow: the config's weights)
  svc.write_config("inputs:\n  - {name: cam, kind: test, pattern: ball, fps: 10, width: 160, height: 120}\n");
  fs::copy_file(fixture("bottleneck_narrow.safetensors"), svc.dir() + "/media/new.safetensors");
  svc.start();
  svc.wait_frames("cam", 2);
  const auto r = svc.request("PUT", "/api/v1/models/default", json{{"weights", svc.dir() + "/media/new.safetensors"}}.dump());
  REQUIRE_MESSAGE(r.status == 200, r.body);
  const auto deployed = r.parsed()["id"].get<std::string>();
  CHECK_FALSE(r.parsed().contains("warning"));
  CHECK(svc.file("state.yaml").find("deployed_models:") != std::string::npos);
  CHECK(svc.stop() == 0);

  svc.start();  // the deployed weights again
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["id"] == deployed);
  // A SIGHUP (the config file as it was) leaves them; a change that saves the state keeps them for the next start.
  svc.signal("HUP");
  for (int i = 0; i < 300 && svc.log().find("SIGHUP: streams added") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["id"] == deployed);
  REQUIRE(svc.add({{"name", "two"}, {"kind", "test"}, {"pattern", "snow"}, {"fps", 5}}).status == 201);
  CHECK(svc.file("state.yaml").find("over: " + fixture("basic_narrow.safetensors")) != std::string::npos);
  CHECK(svc.stop() == 0);
  svc.start();
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["id"] == deployed);
  CHECK(svc.stop() == 0);

  const auto other = fixture("grouped_narrow.safetensors");  // the config names other weights since: they win
  svc.start("--set logging.level=info --set model.weights='" + other + "'");
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["weights"].get<std::string>() == other);
  CHECK(svc.log().find("the config names other weights") != std::string::npos);
  CHECK(svc.stop() == 0);
}
