// A model swapped while the service runs (the app on the CPU engine, driven with curl): new weights deployed over the
// API are built beside the running model and take over between two batches — every frame classified once, by one
// model or the other, never restarted — then rolled back; the requests that must fail do, and leave the running model
// as it was. SIGHUP deploys the weights an edited config file names.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "pipeline/model_swaps.hpp"
#include "service/service_helpers.hpp"

using namespace vc;
using namespace vc::test;
using json = nlohmann::json;

TEST_SUITE_BEGIN("models");

namespace {

// The results lines of `file`, in order.
std::vector<json> lines_of(const std::string& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

// The model ids in the order the results carry them, each once per run of lines ("a", "b", "a").
std::vector<std::string> model_runs(const std::vector<json>& lines) {
  std::vector<std::string> runs;
  for (const auto& l : lines) {
    if (!l.contains("top")) continue;
    const auto id = l["model"].get<std::string>();
    if (runs.empty() || runs.back() != id) runs.push_back(id);
  }
  return runs;
}

}  // namespace

TEST_CASE("a deploy switches every stream to the new weights between two batches; a rollback switches back") {
  Service svc("models");
  const auto labels = path("labels.txt");
  svc.write_config("model: {weights: '" + fixture("basic_narrow.safetensors") + "', labels: '" + labels +
                   "', input_size: 64}\n"
                   "inputs:\n  - {name: cam, kind: test, pattern: ball, fps: 30, width: 160, height: 120, drop: block}\n"
                   "output:\n  results: '" + svc.dir() + "/cam.jsonl'\n");
  fs::copy_file(fixture("bottleneck_narrow.safetensors"), svc.dir() + "/media/new.safetensors");
  {
    std::ofstream bad(svc.dir() + "/media/bad.safetensors");
    bad << "not a model at all";
  }
  svc.start();
  svc.wait_frames("cam", 20);

  const auto before = svc.get("/api/v1/models").parsed();
  REQUIRE(before["models"].size() == 1);
  const auto old_id = before["models"][0]["id"].get<std::string>();
  CHECK(old_id.starts_with("default@"));
  CHECK(old_id.size() == std::string("default@").size() + 12);
  CHECK(before["models"][0]["can_roll_back"] == false);
  CHECK(before["models"][0]["tuned"] == true);  // (the CPU engine: nothing to tune)
  CHECK(before["models"][0]["history"].empty());

  // Refused, each saying why, the running model untouched: weights that are not a model, a file outside
  // api.allowed_dirs, a model the run does not have, a body without weights, no token; nothing to roll back yet.
  auto r = svc.request("PUT", "/api/v1/models/default", json{{"weights", svc.dir() + "/media/bad.safetensors"}}.dump());
  CHECK(r.status == 422);
  CHECK_MESSAGE(r.body.find("the running model goes on") != std::string::npos, r.body);
  r = svc.request("PUT", "/api/v1/models/default", json{{"weights", fixture("bottleneck_narrow.safetensors")}}.dump());
  CHECK(r.status == 403);
  CHECK(svc.request("PUT", "/api/v1/models/gate", json{{"weights", svc.dir() + "/media/new.safetensors"}}.dump()).status == 404);
  CHECK(svc.request("PUT", "/api/v1/models/default", R"({"path": "x"})").status == 422);
  CHECK(svc.request("PUT", "/api/v1/models/default", json{{"weights", svc.dir() + "/media/new.safetensors"}}.dump(), "")
            .status == 401);
  CHECK(svc.request("POST", "/api/v1/models/default/rollback").status == 409);
  CHECK(svc.get("/api/v1/models").parsed()["models"][0]["id"] == old_id);

  // The deploy: answered once every engine has switched; the results from then on carry the new id.
  const auto frames_before = svc.frames("cam");
  r = svc.request("PUT", "/api/v1/models/default", json{{"weights", svc.dir() + "/media/new.safetensors"}}.dump());
  REQUIRE_MESSAGE(r.status == 200, r.body);
  const auto deployed = r.parsed();
  const auto new_id = deployed["id"].get<std::string>();
  CHECK(new_id.starts_with("default@"));
  CHECK(new_id != old_id);
  CHECK(deployed["history"][0]["id"] == old_id);
  CHECK(deployed["can_roll_back"] == true);
  CHECK(svc.get("/api/v1/status").parsed()["model_versions"][0]["id"] == new_id);
  svc.wait_frames("cam", svc.frames("cam") + 20);
  CHECK(svc.frames("cam") > frames_before);

  // Back to the weights it had: no build, the same switch.
  r = svc.request("POST", "/api/v1/models/default/rollback");
  REQUIRE_MESSAGE(r.status == 200, r.body);
  CHECK(r.parsed()["id"] == old_id);
  CHECK(r.parsed()["history"][0]["id"] == new_id);
  svc.wait_frames("cam", svc.frames("cam") + 20);
  CHECK(svc.stream("cam")["restarts"] == 0);
  CHECK(svc.stop() == 0);

  // Every frame classified once, in order, none missing; by the old model, then the new one, then the old one again.
  const auto lines = lines_of(svc.dir() + "/cam.jsonl");
  int64_t expected = -1;
  for (const auto& l : lines) {
    if (!l.contains("top")) continue;
    const auto frame = l["frame"].get<int64_t>();
    if (expected >= 0) REQUIRE_MESSAGE(frame == expected, "a frame skipped or classified twice around a switch");
    expected = frame + 1;
  }
  CHECK(model_runs(lines) == std::vector<std::string>{old_id, new_id, old_id});
  const auto log = svc.log();
  CHECK(log.find("now classifies every stream") != std::string::npos);
  CHECK(log.find("rolled back to " + old_id) != std::string::npos);
}

TEST_CASE("SIGHUP deploys the weights the edited config file names, without restarting a stream") {
  // (the tests' command line names the default model with --model, which a config file does not override: the model
  // edited here is a region's)
  Service svc("models-sighup");
  const auto config = [&](const std::string& weights) {
    svc.write_config("models:\n  gate: {weights: '" + weights + "', labels: '" + path("labels.txt") +
                     "', input_size: 64}\n"
                     "inputs:\n  - {name: cam, kind: test, pattern: ball, fps: 30, width: 160, height: 120,\n"
                     "     regions: [{name: gate, box: [0, 0, 0.5, 0.5], model: gate}]}\n");
  };
  const auto gate = [&] {
    const auto models = svc.get("/api/v1/models").parsed();
    for (const auto& m : models["models"]) {
      if (m["name"] == "gate") return m;
    }
    FAIL("no model 'gate' in /api/v1/models");
    return json();
  };
  config(fixture("basic_narrow.safetensors"));
  svc.start();
  svc.wait_frames("cam", 5);
  const auto old_id = gate()["id"].get<std::string>();
  CHECK(old_id.rfind("gate@", 0) == 0);
  config(fixture("grouped_narrow.safetensors"));
  svc.signal("HUP");
  std::string now = old_id;
  for (int i = 0; i < 300 && now == old_id; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = gate()["id"].get<std::string>();
  }
  CHECK(now != old_id);
  CHECK(gate()["weights"] == fixture("grouped_narrow.safetensors"));
  const auto frames = svc.frames("cam");
  CHECK(svc.wait_frames("cam", frames + 5) > frames);
  CHECK(svc.stream("cam")["restarts"] == 0);
  CHECK(svc.log().find("the other changed settings") == std::string::npos);  // (the weights are not one of them)
  CHECK(svc.stop() == 0);
}

TEST_CASE("a deploy is refused when the new weights lack a label a rule watches") {
  config::Config cfg;
  cfg.events.rules.push_back({});
  cfg.events.rules.back().name = "door_open";
  cfg.events.rules.back().labels = {"open"};
  const std::vector<std::string> before{"open", "closed"};
  CHECK_NOTHROW(pipeline::check_rule_labels(cfg, "door", before, {"closed", "open", "ajar"}));
  CHECK_THROWS_WITH_AS(pipeline::check_rule_labels(cfg, "door", before, {"closed", "shut"}),
                       doctest::Contains("rule door_open watches label 'open', which the new weights do not have"),
                       ConfigError);
  // A label the old model did not have either is not the deploy's concern (the rule watches another model).
  CHECK_NOTHROW(pipeline::check_rule_labels(cfg, "lamp", {"on", "off"}, {"on", "off", "blinking"}));
}

TEST_SUITE_END();
