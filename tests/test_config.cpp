// Config: valid files, every rejection path (with file:line:column and key path), overrides and shorthands.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

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
  CHECK(c.input.kind == "test");
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
  CHECK(c.input.kind == "file");
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
  // A round trip through YAML keeps every value.
  CHECK(to_yaml(parse_config(to_yaml(c))) == to_yaml(c));
}

TEST_CASE("rejections name the file, line, column and key path") {
  CHECK(rejection("model:\n  top_k: 0\n") == "test.yaml:2:10: model.top_k: 0 is out of range [1, 100]");
  CHECK(rejection("model:\n  colour: red\n").rfind("test.yaml:2:3: model.colour: unknown key (known: weights", 0) == 0);
  CHECK(rejection("modle:\n  top_k: 3\n").rfind("test.yaml:1:1: modle: unknown section (known: input, output", 0) == 0);
  CHECK(rejection("model:\n  top_k: three\n") == "test.yaml:2:10: model.top_k: expected an integer, got 'three'");
  CHECK(rejection("model:\n  top_k: 2.5\n") == "test.yaml:2:10: model.top_k: expected an integer, got '2.5'");
  CHECK(rejection("input:\n  loop: maybe\n") == "test.yaml:2:9: input.loop: expected true or false, got 'maybe'");
  CHECK(rejection("input:\n  kind: dvd\n") ==
        "test.yaml:2:9: input.kind: 'dvd' is not one of: webcam, file, uri, image, test");
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

TEST_CASE("--set overrides any key with YAML-typed values") {
  Config c;
  apply_override(c, "model.top_k=3");
  apply_override(c, "model.mean=[0.1, 0.2, 0.3]");
  apply_override(c, "input.loop=true");
  apply_override(c, "output.results=");
  apply_override(c, "inference.algorithms={conv1: 1}");
  CHECK(c.model.top_k == 3);
  CHECK(c.model.mean[2] == doctest::Approx(0.3));
  CHECK(c.input.loop);
  CHECK(c.output.results.empty());
  CHECK(c.inference.algorithms.at("conv1") == 1);
  CHECK_THROWS_WITH_AS(apply_override(c, "model.top_k=0"), "--set model.top_k=0: model.top_k: 0 is out of range [1, 100]",
                       ConfigError);
  CHECK_THROWS_WITH_AS(apply_override(c, "model.nope=1"), "--set model.nope=1: model.nope: unknown key", ConfigError);
  CHECK_THROWS_AS(apply_override(c, "novalue"), ConfigError);
  CHECK_THROWS_AS(apply_override(c, "=3"), ConfigError);
}

TEST_CASE("--input and --output shorthands pick the kind") {
  Config c;
  set_input(c, "/dev/video2");
  CHECK((c.input.kind == "webcam" && c.input.device == "/dev/video2"));
  set_input(c, "rtsp://cam/stream");
  CHECK((c.input.kind == "uri" && c.input.uri == "rtsp://cam/stream"));
  set_input(c, "test:ball");
  CHECK((c.input.kind == "test" && c.input.pattern == "ball"));
  set_input(c, "shots/*.jpg");
  CHECK(c.input.kind == "image");
  set_input(c, "movie.mkv");
  CHECK((c.input.kind == "file" && c.input.path == "movie.mkv"));
  set_output(c, "rtsp://0.0.0.0:9554/live");
  CHECK((c.output.kind == "rtsp" && c.output.rtsp_port == 9554 && c.output.rtsp_path == "/live"));
  CHECK(c.output.rtsp_address == "0.0.0.0");
  set_output(c, "rtsp://127.0.0.1/cam");
  CHECK((c.output.rtsp_address == "127.0.0.1" && c.output.rtsp_port == 9554 && c.output.rtsp_path == "/cam"));
  set_output(c, "none");
  CHECK(c.output.kind == "none");
  set_output(c, "x.mp4");
  CHECK((c.output.kind == "file" && c.output.path == "x.mp4"));
  CHECK_THROWS_AS(set_output(c, "rtsp://host:99999/x"), ConfigError);
}

TEST_CASE("validate checks what single keys cannot") {
  Config c;
  CHECK_NOTHROW(validate(c));
  c.input.kind = "file";
  CHECK_THROWS_WITH_AS(validate(c), "input.path: required when input.kind is file", ConfigError);
  c.input.path = "a.mp4";
  c.output.kind = "file";
  c.output.path = "out.avi";
  CHECK_THROWS_AS(validate(c), ConfigError);
  c.output.path = "out.mp4";
  c.input.width = 640;
  CHECK_THROWS_AS(validate(c), ConfigError);
  c.input.height = 480;
  CHECK_NOTHROW(validate(c));
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

TEST_SUITE_END();
