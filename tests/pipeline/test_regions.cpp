// Regions, each by a model of its own: which items a frame gives (every N, boxes in pixels and fractions), and the
// app end to end — two test-pattern streams, three regions on two models, a rule on one region, MQTT — against the
// CPU engine run on each region cut out by hand.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>

#include "config/errors.hpp"
#include "inference/classifier.hpp"
#include "inference/postprocess.hpp"
#include "pipeline/regions/region_table.hpp"
#include "pipeline_helpers.hpp"

using namespace vc;
using namespace vc::test;

TEST_SUITE_BEGIN("regions");

namespace {

config::Region region(const std::string& name, std::array<double, 4> box, const std::string& model = "default", int every = 1) {
  config::Region r;
  r.name = name;
  r.box = box;
  r.model = model;
  r.every = every;
  return r;
}

// The first frame of a stream, held (its buffer stays mapped while the frame lives).
pipeline::Frame first_frame(config::Input in) {
  auto hub = std::make_shared<pipeline::FrameHub>(std::vector<pipeline::QueuePolicy>{{4, false}});
  auto stop = std::make_shared<std::atomic<bool>>(false);
  in.max_frames = 1;
  pipeline::Stream s(0, in, false, {hub, nullptr, nullptr, stop, nullptr, nullptr});
  s.start();
  std::optional<pipeline::Frame> frame;
  for (;;) {
    auto batch = hub->pop_batch(4, std::chrono::microseconds(0));
    if (!batch.empty() && !frame) frame = batch.front();
    if (batch.empty() && hub->all_done()) break;
  }
  s.join();
  REQUIRE(frame);
  return *frame;
}

// The box cut out of the picture by hand: a view of its own (the planes start at the box; 4:2:0 boxes at even
// pixels), not a crop.
inference::FrameView cut(const inference::FrameView& f, const config::PixelBox& b) {
  using inference::PixelFormat;
  REQUIRE(f.rotation == 0);
  inference::FrameView v = f;
  v.width = b.width;
  v.height = b.height;
  switch (f.format) {
    case PixelFormat::RGB:
    case PixelFormat::BGR: v.planes[0] = f.planes[0] + long(b.y) * f.strides[0] + 3 * b.x; break;
    case PixelFormat::RGBA:
    case PixelFormat::BGRx: v.planes[0] = f.planes[0] + long(b.y) * f.strides[0] + 4 * b.x; break;
    case PixelFormat::I420:
    case PixelFormat::NV12:
      REQUIRE((b.x % 2 == 0 && b.y % 2 == 0));
      v.planes[0] = f.planes[0] + long(b.y) * f.strides[0] + b.x;
      v.planes[1] = f.planes[1] + long(b.y / 2) * f.strides[1] + (f.format == PixelFormat::NV12 ? b.x : b.x / 2);
      if (f.format == PixelFormat::I420) v.planes[2] = f.planes[2] + long(b.y / 2) * f.strides[2] + b.x / 2;
      break;
    default: FAIL("a test-pattern frame in an unexpected format: " << inference::pixel_format_name(f.format));
  }
  return v;
}

}  // namespace

TEST_CASE("a frame gives its whole picture and the regions due at it, each by its model; a box outside is left out") {
  config::Input in;
  in.name = "cam";
  in.whole = true;
  in.regions = {region("gate", {10, 20, 100, 50}, "gate_state"), region("mat", {0.5, 0.5, 0.25, 0.5}),
                region("lamp", {0, 0, 8, 8}, "gate_state", 3)};
  pipeline::RegionTable table({"default", "gate_state"}, 4);
  table.set(1, in);
  const auto plan = table.get(1);
  std::vector<pipeline::WorkItem> items;
  pipeline::RegionTable::items_of(*plan, 7, 3, 640, 480, items);
  REQUIRE(items.size() == 4);  // whole, gate, mat, lamp (3 % 3 == 0)
  CHECK((items[0].region == -1 && items[0].model == 0 && items[0].box.whole() && items[0].frame == 7));
  CHECK((items[1].name == "gate" && items[1].model == 1 && items[1].box.x == 10 && items[1].box.height == 50));
  CHECK((items[2].name == "mat" && items[2].model == 0 && items[2].box.x == 320 && items[2].box.width == 160));
  CHECK(items[3].name == "lamp");
  items.clear();
  pipeline::RegionTable::items_of(*plan, 0, 4, 640, 480, items);  // frame 4: no lamp
  CHECK(items.size() == 3);
  items.clear();
  std::vector<std::string> outside;
  pipeline::RegionTable::items_of(*plan, 0, 0, 100, 60, items, &outside);  // gate does not fit a 100x60 picture
  CHECK(items.size() == 3);
  REQUIRE(outside.size() == 1);
  CHECK(outside[0].find("region 'gate'") == 0);
  // The most items a frame gives each model: what a batch may take so that no model's part overflows its batch.
  CHECK(table.most_items_per_frame(0) == 2);  // whole + mat
  CHECK(table.most_items_per_frame(1) == 2);  // gate + lamp
  in.regions.pop_back();
  table.set(1, in);
  CHECK(table.most_items_per_frame(1) == 1);
  // A stream without regions is classified whole; a region whose model was not loaded is refused, naming it.
  config::Input plain;
  plain.name = "plain";
  table.set(2, plain);
  CHECK(table.get(2)->whole);
  CHECK(table.get(2)->regions.empty());
  in.regions = {region("x", {0, 0, 4, 4}, "parcel")};
  CHECK_THROWS_WITH_AS(table.set(3, in), doctest::Contains("model 'parcel' is not loaded in this run"), ConfigError);
}

TEST_CASE("two streams, three regions on two models: each region's top-1 is the CPU engine's on it cut by hand; "
          "events and MQTT per region") {
  const auto dir = path("regions-e2e");
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream labels(dir + "/lamp-labels.txt");
    for (int i = 0; i < 10; ++i) labels << "lamp-" << i << "\n";
  }
  const auto port = free_port(45000);
  const std::string yaml =
      "model: {weights: '" + fixture("basic_narrow.safetensors") + "', labels: '" + path("labels.txt") + "', input_size: 64}\n"
      "models:\n"
      "  lamps: {weights: '" + fixture("bottleneck_narrow.safetensors") + "', labels: '" + dir + "/lamp-labels.txt', "
      "input_size: 48, resize: stretch}\n"
      "inference: {device: cpu, batch_size: 4}\n"
      "smoothing: {window: 1, threshold: 0}\n"
      "inputs:\n"
      "  - {name: a, kind: test, pattern: smpte75, width: 160, height: 120, fps: 30, max_frames: 30, drop: block, whole: true,\n"
      "     regions: [{name: gate, box: [10, 20, 100, 50], model: lamps}, {name: mat, box: [0.5, 0.5, 0.25, 0.5]}]}\n"
      "  - {name: b, kind: test, pattern: smpte75, width: 160, height: 120, fps: 30, max_frames: 30, drop: block,\n"
      "     regions: [{name: lamp, box: [40, 0, 80, 60], model: lamps, every: 3}]}\n"
      "output: {kind: none, results: '" + dir + "/{stream}.jsonl', collect: {dir: '" + dir + "/unsure', below_confidence: 1}}\n"
      "events: {dir: '" + dir + "/events', clips: {enabled: false},\n"
      "         rules: [{name: seen, labels: ['*'], regions: [gate], min_confidence: 0, min_duration_s: 0.1}]}\n"
      "mqtt: {enabled: true, host: 127.0.0.1, port: " + port + ", topic_prefix: vc, result_interval_s: 0}\n";
  std::ofstream(dir + "/config.yaml") << yaml;
  std::ofstream(dir + "/mosquitto.conf") << "listener " << port << " 127.0.0.1\nallow_anonymous true\n";
  const auto got = dir + "/mqtt.txt";
  const auto r = run_command(
      "mosquitto -c '" + dir + "/mosquitto.conf' >'" + dir + "/broker.log' 2>&1 & b=$!; sleep 0.5; "
      "mosquitto_sub -h 127.0.0.1 -p " + port + " -t 'vc/#' -v -q 1 >'" + got + "' 2>&1 & s=$!; sleep 0.5; "
      "timeout --foreground 120 '" + std::string(VC_APP_BINARY) + "' --config '" + dir + "/config.yaml' "
      "--set logging.level=warn; rc=$?; sleep 1; kill $s $b; exit $rc");
  REQUIRE_MESSAGE(r.code == 0, r.output);

  // By hand: the pattern's picture (smpte75 is the same at every frame; smpte's corner moves), each box cut out of it, through the CPU engine.
  auto cfg = config::parse_config(yaml, "regions.yaml");
  config::validate(cfg);
  const auto frame = first_frame(cfg.inputs[0]);
  const auto whole_model = inference::Classifier::create(cfg);
  const auto lamp_model = inference::Classifier::create(config::for_model(cfg, "lamps"));
  struct Expected {
    inference::Prediction top;
  };
  auto expect = [&](inference::Classifier& c, const inference::FrameView& v) {
    const auto logits = c.classify(std::span<const inference::FrameView>(&v, 1)).at(0);
    return inference::top_k(inference::softmax(logits), 1, c.labels()).at(0);
  };
  const auto box = [&](const config::Region& reg) { return *config::region_pixels(reg, 160, 120); };
  std::map<std::pair<std::string, std::string>, inference::Prediction> want{
      {{"a", ""}, expect(*whole_model, frame.view)},
      {{"a", "gate"}, expect(*lamp_model, cut(frame.view, box(cfg.inputs[0].regions[0])))},
      {{"a", "mat"}, expect(*whole_model, cut(frame.view, box(cfg.inputs[0].regions[1])))},
      {{"b", "lamp"}, expect(*lamp_model, cut(frame.view, box(cfg.inputs[1].regions[0])))},
  };
  // (the three crops differ: a region that classified the whole picture instead would not pass)
  CHECK(want.at({"a", "gate"}).score != doctest::Approx(want.at({"b", "lamp"}).score).epsilon(1e-6));

  std::map<std::pair<std::string, std::string>, int> lines;
  for (const std::string stream : {"a", "b"}) {
    for (const auto& j : read_jsonl(dir + "/" + stream + ".jsonl")) {
      if (!j.contains("top")) continue;
      const std::string reg = j.value("region", "");
      CAPTURE(stream);
      CAPTURE(reg);
      const auto key = std::pair{stream, reg};
      REQUIRE(want.count(key));
      ++lines[key];
      CHECK(j["top"][0]["label"] == want.at(key).label);
      CHECK(j["top"][0]["score"].get<double>() == doctest::Approx(want.at(key).score).epsilon(1e-4));
      if (!reg.empty()) {
        CHECK(j["model"].get<std::string>().starts_with(reg == "mat" ? "default@" : "lamps@"));
        CHECK(j["box"].size() == 4);
      }
      if (reg == "lamp") CHECK(j["frame"].get<int64_t>() % 3 == 0);
    }
  }
  CHECK(lines[{"a", ""}] == 30);
  CHECK(lines[{"a", "gate"}] == 30);
  CHECK(lines[{"a", "mat"}] == 30);
  CHECK(lines[{"b", "lamp"}] == 10);  // every third of 30
  CHECK(lines.count({"b", ""}) == 0);  // regions alone: the whole picture is not classified

  // The rule watches the gate alone: its events are the gate's, of stream a; the snapshot was written.
  int events = 0;
  for (const auto& j : read_jsonl(dir + "/events/events.jsonl")) {
    ++events;
    CHECK(j["stream"] == "a");
    CHECK(j["region"] == "gate");
    CHECK(j["id"].get<std::string>().find("a-seen-gate-") == 0);
  }
  CHECK(events >= 2);  // new ... end

  // MQTT: each region's state (retained) and results under PREFIX/STREAM/REGION/.
  std::map<std::string, nlohmann::json> last;
  std::ifstream in(got);
  for (std::string line; std::getline(in, line);) {
    const auto space = line.find(' ');
    if (space == std::string::npos) continue;
    last[line.substr(0, space)] = nlohmann::json::parse(line.substr(space + 1), nullptr, false);
  }
  for (const auto& [topic, stream, reg] : {std::tuple{"vc/a/gate/state", "a", "gate"}, {"vc/a/mat/state", "a", "mat"},
                                           {"vc/b/lamp/state", "b", "lamp"}}) {
    CAPTURE(topic);
    REQUIRE(last.count(topic));
    CHECK(last[topic]["region"] == reg);
    CHECK(last[topic]["label"] == want.at({stream, reg}).label);
  }
  // output.collect keeps each region's unsure frames apart, the region alone: DIR/REGION/LABEL/STREAM-REGION-….jpg.
  std::set<std::string> collected;
  for (const auto& j : read_jsonl(dir + "/unsure/collect.jsonl")) {
    const std::string reg = j.value("region", "");
    collected.insert(j["stream"].get<std::string>() + "/" + reg);
    if (reg != "gate") continue;
    CHECK(j["file"].get<std::string>().rfind("gate/" + want.at({"a", "gate"}).label + "/a-gate-", 0) == 0);
    const auto probe = run_command("gst-discoverer-1.0 '" + dir + "/unsure/" + j["file"].get<std::string>() + "'");
    CHECK(probe.output.find("Width: 100") != std::string::npos);
    CHECK(probe.output.find("Height: 50") != std::string::npos);
  }
  CHECK(collected == std::set<std::string>{"a/", "a/gate", "a/mat", "b/lamp"});
  // evaluate scores each region on its own (ground truth FRAME<TAB>REGION<TAB>LABEL): the hand-cut labels, every frame.
  {
    std::ofstream truth(dir + "/truth.txt");
    for (int n = 0; n < 30; ++n) {
      truth << n << "\tgate\t" << want.at({"a", "gate"}).label << "\n" << n << "\t" << want.at({"a", ""}).label << "\n";
    }
  }
  const auto scored = run_command("'" + std::string(VC_APP_BINARY) + "' evaluate --results '" + dir + "/a.jsonl' --ground-truth '" +
                                  dir + "/truth.txt'");
  REQUIRE_MESSAGE(scored.code == 0, scored.output);
  CHECK(scored.output.find("== region gate\nframes scored: 30\nframe accuracy: 100.00% (30/30)") != std::string::npos);
  CHECK(scored.output.find("== the whole picture\nframes scored: 30 (0 in the ground truth without a result)\nframe "
                           "accuracy: 100.00% (30/30)") != std::string::npos);
  CHECK(last.count("vc/a/gate/result"));
  CHECK(last.count("vc/b/lamp/result"));
  CHECK(last["vc/b/lamp/result"]["region"] == "lamp");
}

TEST_CASE("a region whose box is not inside the stream's picture refuses that stream at its first frame, not the run") {
  // (with width and height given, the configuration itself is refused: config's tests)
  const auto results = path("regions-outside-{stream}.jsonl"), file = path("regions-outside.yaml");
  std::ofstream(file) << "inputs:\n"
                         "  - {name: ok, kind: test, max_frames: 5, width: 160, height: 120, drop: block}\n"
                         "  - {name: bad, kind: test, max_frames: 5, regions: [{name: gate, box: [300, 200, 100, 100]}]}\n";
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(app("--config '" + file + "' --output none --set output.results='" + results + "'"));
  CHECK(r.code == 78);  // the configuration does not fit the stream
  CHECK(r.output.find("stream bad: test pattern 'smpte': region 'gate': box [300, 200, 100, 100] is not inside the "
                      "320x240 picture") != std::string::npos);
  CHECK(r.output.find("restart") == std::string::npos);  // a restart would not change it: none is tried
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  CHECK(frame_lines(path("regions-outside-ok.jsonl"), "ok") == 5);
}

TEST_SUITE_END();
