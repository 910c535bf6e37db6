// Config: valid files, every rejection path (with file:line:column and key path), overrides and shorthands.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "config/version.hpp"

using namespace vc;
using namespace vc::config;

TEST_SUITE_BEGIN("config");

namespace {

// The message of the ConfigError that parsing `yaml` throws ("" if it parses).
std::string rejection(const std::string& yaml) {
  try {
    parse_config(yaml, "test.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an empty document gives every default") {
  const Config c = parse_config("");
  const Config defaults;
  CHECK(c.model.top_k == defaults.model.top_k);
  CHECK(c.inputs.at(0).kind == InputKind::Test);
  CHECK(c.model.mean[1] == doctest::Approx(0.456));
  CHECK(to_yaml(c) == to_yaml(defaults));
}

TEST_CASE("a full document maps onto the typed config") {
  const Config c = parse_config(R"(
input: {kind: file, path: a.mp4, width: 640, height: 480, fps: 29.97, loop: true, drop: block}
output: {kind: rtsp, rtsp_port: 9000, rtsp_path: /x, bitrate_kbps: 2500, results: r.jsonl}
model: {weights: w.safetensors, architecture: resnet50, input_size: 160, resize: letterbox,
        mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], top_k: 3}
inference: {device: cpu, batch_size: 8, precision: tf32_stem, algorithms: {layer1.0.conv1: 2}}
overlay: {position: bottom-right, text_color: [255, 255, 0]}
smoothing: {window: 10, threshold: 0.5}
logging: {level: debug}
)");
  CHECK(c.input.kind == InputKind::File);
  CHECK(c.inputs.size() == 1);
  CHECK(c.inputs[0].path == "a.mp4");
  CHECK(c.input.fps == doctest::Approx(29.97));
  CHECK(c.input.loop);
  CHECK(c.output.rtsp_port == 9000);
  CHECK(c.model.architecture == "resnet50");
  CHECK(c.model.std[2] == doctest::Approx(0.25));
  CHECK(c.inference.batch_size == 8);
  CHECK(c.inference.algorithms.at("layer1.0.conv1") == 2);
  CHECK(c.overlay.text_color == Rgb{255, 255, 0});
  CHECK(c.smoothing.window == 10);
  CHECK(c.logging.level == "debug");
  CHECK(c.output.kind == OutputKind::Rtsp);
  CHECK(c.model.resize == Resize::Letterbox);
  CHECK(c.inference.device == Device::Cpu);
  CHECK(c.inference.precision == Precision::Tf32Stem);
  CHECK(c.overlay.position == Corner::BottomRight);
  CHECK(c.input.drop == DropPolicy::Block);
  CHECK(c.is_set("model.top_k"));
  CHECK(!c.is_set("model.bn_eps"));
  // A round trip through YAML keeps every value.
  CHECK(to_yaml(parse_config(to_yaml(c))) == to_yaml(c));
}

TEST_CASE("rejections name the file, line, column and key path") {
  CHECK(rejection("model:\n  top_k: 0\n") == "test.yaml:2:10: model.top_k: 0 is out of range [1, 100]");
  CHECK(rejection("model:\n  colour: red\n").rfind("test.yaml:2:3: model.colour: unknown key (known: weights", 0) == 0);
  CHECK(rejection("modle:\n  top_k: 3\n").rfind("test.yaml:1:1: modle: unknown section (did you mean model?) (known: input, inputs, output", 0) == 0);
  CHECK(rejection("model:\n  top_k: three\n") == "test.yaml:2:10: model.top_k: expected an integer, got 'three'");
  CHECK(rejection("model:\n  top_k: 2.5\n") == "test.yaml:2:10: model.top_k: expected an integer, got '2.5'");
  CHECK(rejection("input:\n  loop: maybe\n") == "test.yaml:2:9: input.loop: expected true or false, got 'maybe'");
  CHECK(rejection("input:\n  kind: dvd\n") ==
        "test.yaml:2:9: input.kind: 'dvd' is not one of: webcam, file, uri, image, test");
  CHECK(rejection("input:\n  kind: fiel\n") ==
        "test.yaml:2:9: input.kind: 'fiel' is not one of: webcam, file, uri, image, test (did you mean file?)");
  CHECK(rejection("model:\n  topk: 3\n").rfind("test.yaml:2:3: model.topk: unknown key (did you mean top_k?) (known: weights", 0) == 0);
  CHECK(rejection("input:\n  reconnect: {attempt: 3}\n").rfind("test.yaml:2:15: input.reconnect.attempt: unknown key (did you mean attempts?)", 0) == 0);
  // Keys that are not names (a list as a key) are configuration errors, not crashes.
  CHECK(rejection("? [a, b]\n: 1\n").find("a key must be a name") != std::string::npos);
  CHECK(rejection("inference:\n  algorithms: {[x]: 1}\n").find("a key must be a name") != std::string::npos);
  CHECK(rejection("inputs: {kind: file}\n").find("inputs: expected a list of input sections") != std::string::npos);

  CHECK(rejection("inputs:\n  - {kind: file, pathh: a.mp4}\n").find("inputs.0.pathh: unknown key (did you mean path?)") != std::string::npos);
  CHECK(rejection("model:\n  mean: [1, 2]\n") ==
        "test.yaml:2:9: model.mean: expected a list of 3 numbers, got a list");
  CHECK(rejection("model:\n  std: [1, 0, 1]\n") == "test.yaml:2:8: model.std[1]: 0 is out of range [1e-06, 10]");
  CHECK(rejection("overlay:\n  text_color: [0, 0, 256]\n") ==
        "test.yaml:2:15: overlay.text_color[2]: 256 is out of range [0, 255]");
  CHECK(rejection("model: 3\n") == "test.yaml:1:8: model: expected a mapping of keys, got '3'");
  CHECK(rejection("- a\n- b\n") == "test.yaml:1:1: <top level>: expected a mapping of sections");
  CHECK(rejection("input:\n  path: [a, b]\n") == "test.yaml:2:9: input.path: expected a string, got a list");
  CHECK(rejection("inference:\n  algorithms: {conv1: -1}\n").find("inference.algorithms.conv1") != std::string::npos);
  CHECK(rejection("model:\n  top_k: [1\n").rfind("test.yaml:", 0) == 0);
  CHECK(rejection("model:\n  top_k: [1\n").find("invalid YAML") != std::string::npos);
}

TEST_CASE("load_config reads files and reports missing ones as missing input") {
  CHECK_THROWS_AS(load_config("/nonexistent/config.yaml"), NoInputError);
  CHECK_THROWS_WITH_AS(load_config(std::filesystem::temp_directory_path().string()), doctest::Contains("is a directory"),
                       NoInputError);
  const auto path = std::filesystem::temp_directory_path() / "vc-test-config.yaml";
  std::ofstream(path) << "model:\n  top_k: 7\n";
  CHECK(load_config(path.string()).model.top_k == 7);
  std::ofstream(path) << "model:\n  top_k: 700\n";
  try {
    load_config(path.string());
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).rfind(path.string() + ":2:10: model.top_k:", 0) == 0);
    CHECK(e.code() == ExitCode::kConfig);
  }
  std::filesystem::remove(path);
}

TEST_CASE("--set overrides any key; string keys take the text as typed") {
  Config c;
  apply_override(c, "model.top_k=3");
  apply_override(c, "model.mean=[0.1, 0.2, 0.3]");
  apply_override(c, "input.loop=true");
  apply_override(c, "output.results=");
  apply_override(c, "inference.algorithms={conv1: 1}");
  CHECK(c.model.top_k == 3);
  CHECK(c.model.mean[2] == doctest::Approx(0.3));
  CHECK(c.inputs[0].loop);
  CHECK(c.output.results.empty());
  CHECK(c.inference.algorithms.at("conv1") == 1);
  // "-" (stdout) is text, not a YAML list; quotes are YAML's and come off.
  apply_override(c, "output.results=-");
  CHECK(c.output.results == "-");
  apply_override(c, "output.results='out/r.jsonl'");
  CHECK(c.output.results == "out/r.jsonl");
  apply_override(c, "model.labels=a: b.txt");
  CHECK(c.model.labels == "a: b.txt");
  CHECK_THROWS_WITH_AS(apply_override(c, "model.top_k=0"), "--set model.top_k=0: model.top_k: 0 is out of range [1, 100]",
                       ConfigError);
  CHECK_THROWS_WITH_AS(apply_override(c, "model.topk=3"), "--set model.topk=3: model.topk: unknown key (did you mean model.top_k?)",
                       ConfigError);
  CHECK_THROWS_WITH_AS(apply_override(c, "inference.algorithms={[x]: 1}"), doctest::Contains("a key must be a name"), ConfigError);
  CHECK_THROWS_AS(apply_override(c, "novalue"), ConfigError);
  CHECK_THROWS_AS(apply_override(c, "=3"), ConfigError);
  CHECK(c.is_set("model.top_k"));
}

TEST_CASE("several streams: inputs list with input defaults, per-stream and all-stream overrides") {
  Config c = parse_config(R"(
input: {fps: 15, drop: drop}
inputs:
  - {kind: file, path: a.mp4, name: door}
  - {kind: test, pattern: ball}
)");
  REQUIRE(c.inputs.size() == 2);
  CHECK(c.inputs[0].kind == InputKind::File);
  CHECK(c.inputs[0].fps == doctest::Approx(15));  // from input:
  CHECK(c.inputs[1].pattern == "ball");
  CHECK(c.inputs[1].drop == DropPolicy::Drop);
  apply_override(c, "inputs.1.pattern=snow");
  apply_override(c, "inputs[0].loop=true");
  apply_override(c, "input.max_frames=9");
  CHECK(c.inputs[1].pattern == "snow");
  CHECK(c.inputs[0].loop);
  CHECK(!c.inputs[1].loop);
  CHECK((c.inputs[0].max_frames == 9 && c.inputs[1].max_frames == 9));
  CHECK_THROWS_WITH_AS(apply_override(c, "inputs.5.loop=true"), doctest::Contains("there are 2 stream(s)"), ConfigError);
  validate(c);
  CHECK(c.inputs[0].name == "door");
  CHECK(c.inputs[1].name == "stream1");
  // Several streams cannot share one output file.
  c.output.kind = OutputKind::File;
  c.output.path = "out.mp4";
  CHECK_THROWS_WITH_AS(validate(c), doctest::Contains("put {stream} in the path"), ConfigError);
  c.output.path = "out/{stream}.mp4";
  CHECK_NOTHROW(validate(c));
  CHECK(for_stream(c.output.path, "door") == "out/door.mp4");
  c.output.path = "mosaic.mp4";
  c.output.tiled = true;
  CHECK_NOTHROW(validate(c));
  c.inputs[1].name = "door";
  CHECK_THROWS_WITH_AS(validate(c), doctest::Contains("names two streams"), ConfigError);
  c.inputs[1].name = "a b";
  CHECK_THROWS_AS(validate(c), ConfigError);
  // Names go into paths ({stream}), topics and URLs: never a way out of a folder.
  for (const char* bad : {"..", ".", "../x", "a/b", "a+b", "a#b", "x\ty"}) {
    CAPTURE(bad);
    c.inputs[1].name = bad;
    CHECK_THROWS_WITH_AS(validate(c), doctest::Contains("inputs.1.name"), ConfigError);
  }
  c.inputs[1].name = "cam.2";
  CHECK_NOTHROW(validate(c));
}

TEST_CASE("paths in a config file resolve against the file's directory") {
  const auto dir = std::filesystem::temp_directory_path() / "vc-config-dir";
  std::filesystem::create_directories(dir / "sub");
  const auto file = dir / "sub" / "job.yaml";
  std::ofstream(file) << "input: {kind: file, path: clip.mp4}\noutput: {kind: file, path: ../out/x.mp4, results: '-'}\n"
                         "model: {weights: /abs/w.safetensors, labels: labels.txt}\n";
  const Config c = load_config(file.string());
  CHECK(c.inputs[0].path == (dir / "sub" / "clip.mp4").string());
  CHECK(c.output.path == (dir / "out" / "x.mp4").string());
  CHECK(c.output.results == "-");
  CHECK(c.model.weights == "/abs/w.safetensors");
  CHECK(c.model.labels == (dir / "sub" / "labels.txt").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("--input and --output shorthands pick the kind") {
  Input in;
  set_input(in, "/dev/video2");
  CHECK((in.kind == InputKind::Webcam && in.device == "/dev/video2"));
  set_input(in, "rtsp://cam/stream");
  CHECK((in.kind == InputKind::Uri && in.uri == "rtsp://cam/stream"));
  set_input(in, "test:ball");
  CHECK((in.kind == InputKind::Test && in.pattern == "ball"));
  set_input(in, "shots/*.jpg");
  CHECK(in.kind == InputKind::Image);
  set_input(in, "movie.mkv");
  CHECK((in.kind == InputKind::File && in.path == "movie.mkv"));
  CHECK_THROWS_AS(set_input(in, ""), UsageError);
  Config c;
  set_output(c, "rtsp://0.0.0.0:9554/live");
  CHECK((c.output.kind == OutputKind::Rtsp && c.output.rtsp_port == 9554 && c.output.rtsp_path == "/live"));
  CHECK(c.output.rtsp_address == "0.0.0.0");
  set_output(c, "rtsp://127.0.0.1/cam");
  CHECK((c.output.rtsp_address == "127.0.0.1" && c.output.rtsp_port == 9554 && c.output.rtsp_path == "/cam"));
  set_output(c, "none");
  CHECK(c.output.kind == OutputKind::None);
  set_output(c, "x.mp4");
  CHECK((c.output.kind == OutputKind::File && c.output.path == "x.mp4"));
  set_output(c, "labelled/");
  CHECK((c.output.kind == OutputKind::Images && c.output.path == "labelled/"));
  set_output(c, "out/%s.jpg");
  CHECK(c.output.kind == OutputKind::Images);
  CHECK_THROWS_AS(set_output(c, "rtsp://host:99999/x"), UsageError);
  CHECK_THROWS_AS(set_output(c, "rtsp://host:123456789012345678901/x"), UsageError);
  CHECK_THROWS_WITH_AS(set_output(c, "screen"), doctest::Contains("display"), UsageError);
  CHECK_THROWS_AS(set_output(c, ""), UsageError);
}

TEST_CASE("validate checks what single keys cannot") {
  Config c;
  CHECK_NOTHROW(validate(c));
  c.inputs[0].kind = InputKind::File;
  CHECK_THROWS_WITH_AS(validate(c), "input.path: required when input.kind is file", ConfigError);
  c.inputs[0].path = "a.mp4";
  c.output.kind = OutputKind::File;
  c.output.path = "out.avi";
  CHECK_THROWS_AS(validate(c), ConfigError);
  c.output.path = "out.mp4";
  c.inputs[0].width = 640;
  CHECK_THROWS_AS(validate(c), ConfigError);
  c.inputs[0].height = 480;
  CHECK_NOTHROW(validate(c));
  c.inputs[0].width = 2;
  c.inputs[0].height = 2;
  CHECK_THROWS_WITH_AS(validate(c), doctest::Contains("too small"), ConfigError);
}

TEST_CASE("config output prints numbers in their shortest exact form") {
  const auto yaml = to_yaml(Config{});
  CHECK(yaml.find("0.485") != std::string::npos);
  CHECK(yaml.find("0.48499999") == std::string::npos);
}

TEST_CASE("every shipped config parses and validates") {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(vc::kSourceDir) + "/assets/configs")) {
    CAPTURE(entry.path().string());
    Config c;
    CHECK_NOTHROW(c = load_config(entry.path().string()));
    CHECK_NOTHROW(validate(c));
    ++seen;
  }
  CHECK(seen >= 4);
}

TEST_CASE("every key is documented") {
  const auto keys = describe_keys();
  CHECK(keys.size() > 40);
  for (const auto& k : keys) {
    CAPTURE(k.path);
    CHECK(!k.description.empty());
    // The documented default parses back through --set.
    Config c;
    CHECK_NOTHROW(apply_override(c, k.path + "=" + k.default_value));
  }
}

TEST_CASE("a service may start with no stream (they come over its API), and the streams it adds need files of their own") {
  auto empty = parse_config("inputs: []\n", "test.yaml");
  CHECK_THROWS_WITH_AS(validate(empty), doctest::Contains("inputs: at least one input is needed (or api.enabled"), ConfigError);
  auto service = parse_config("api: {enabled: true}\ninputs: []\n", "test.yaml");
  CHECK_NOTHROW(validate(service));
  auto shared = parse_config("api: {enabled: true}\noutput: {kind: file, path: a.mp4}\n", "test.yaml");
  try {
    validate(shared);
    FAIL("one output file for streams that may be added");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("put {stream} in the path") != std::string::npos);
    CHECK(e.key() == "output.path");
  }
}

TEST_CASE("a stream from a request body is checked as an inputs: entry is, and saved streams read back the same") {
  Config base = parse_config("input:\n  fps: 12\n", "test.yaml");
  auto in = parse_input(base, R"({"name": "cam", "kind": "uri", "uri": "rtsp://h/s", "loop": false})", "request");
  CHECK(in.name == "cam");
  CHECK(in.kind == InputKind::Uri);
  CHECK(in.fps == 12);  // the config's input: defaults apply
  try {
    (void)parse_input(base, R"({"name": "cam", "kind": "test", "fps": 5000})", "request");
    FAIL("fps out of range");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "input.fps");
  }
  CHECK_THROWS_WITH_AS(parse_input(base, R"({"kind": "test"})", "request"), doctest::Contains("input.name: required"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_input(base, R"({"name": "a/b", "kind": "test"})", "request"), doctest::Contains("input.name"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(parse_input(base, "[1, 2]", "request"), doctest::Contains("expected a mapping"), ConfigError);
  CHECK_THROWS_WITH_AS(parse_input(base, R"({"name": "x", "kind": "test", "pipeline": "videotestsrc ! fakesink"})", "request"),
                       doctest::Contains("input.pipeline: unknown key"), ConfigError);

  // Saved (only what differs from the input: defaults), then read back: the same streams.
  const auto file = (std::filesystem::temp_directory_path() / ("vc-state-" + std::to_string(getpid()) + ".yaml")).string();
  auto other = parse_input(base, R"({"name": "yard", "kind": "test", "pattern": "ball", "fps": 5})", "request");
  save_inputs({in, other}, file, base.input);
  std::ifstream saved(file);
  const std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  CHECK(text.find("{name: yard, kind: test, pattern: ball, fps: 5}") != std::string::npos);
  Config restored = base;
  load_inputs(restored, file);
  REQUIRE(restored.inputs.size() == 2);
  CHECK(input_yaml(restored.inputs[0]) == input_yaml(in));
  CHECK(input_yaml(restored.inputs[1]) == input_yaml(other));
  std::ofstream(file) << "inputs: []\nmodel: {top_k: 3}\n";
  CHECK_THROWS_WITH_AS(load_inputs(restored, file), doctest::Contains("holds `inputs:` and nothing else"), ConfigError);
  std::filesystem::remove(file);
}

TEST_SUITE_END();
