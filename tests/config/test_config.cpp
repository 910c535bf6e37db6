// Config: valid files, every rejection path (with file:line:column and key path), overrides and shorthands.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <fmt/format.h>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "config/redact.hpp"
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
  // A control character in a text (a value ending in a carriage return would not even read back as written).
  CHECK(rejection("output:\n  path: \"out.mp4\\r\"\n") ==
        "test.yaml:2:9: output.path: a control character (U+000D) at position 8 of the text: not allowed in a value");
  CHECK(rejection("events:\n  rules: [{name: r, labels: [\"a\\u0001\"]}]\n").find("U+0001") != std::string::npos);
  CHECK(rejection("inference:\n  algorithms: {\"a\\u007f\": 1}\n").find("U+007F") != std::string::npos);
  CHECK_NOTHROW(config::parse_config("input:\n  device: \"a\\tb\"\n", "test.yaml"));
  // Text that is not UTF-8 (Latin-1, an overlong form, a lone continuation byte) would not read back either.
  CHECK(rejection("input:\n  path: caf\xe9.mp4\n") ==
        "test.yaml:2:9: input.path: the text is not valid UTF-8 (byte 0xE9 at position 4)");
  CHECK(rejection("input:\n  device: a\xc0\x96\n").find("not valid UTF-8 (byte 0xC0") != std::string::npos);
  CHECK(rejection("input:\n  device: \x96\n").find("not valid UTF-8") != std::string::npos);
  CHECK_NOTHROW(config::parse_config("input:\n  path: caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x8e\xa5.mp4\n", "test.yaml"));
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
  // Which were added over the API is kept beside them (SIGHUP leaves those be), and only the owner reads the file.
  save_inputs({in, other}, file, base.input, {"yard"});
  CHECK(load_added_over_api(file) == std::vector<std::string>{"yard"});
  load_inputs(restored, file);
  CHECK(restored.inputs.size() == 2);
  CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  std::ofstream(file) << "inputs: []\nmodel: {top_k: 3}\n";
  CHECK_THROWS_WITH_AS(load_inputs(restored, file), doctest::Contains("holds `inputs:` and nothing else"), ConfigError);
  std::filesystem::remove(file);
}

TEST_CASE("credentials are replaced in any text that holds a URI; nothing else changes") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rtsp://admin:pw@cam.local:554/stream1", "rtsp://***@cam.local:554/stream1"},
      {"rtsp://admin@cam/x", "rtsp://***@cam/x"},
      {"http://h/s?user=a&password=b&fps=5#t", "http://h/s?user=***&password=***&fps=5#t"},
      {"rtsp://cam/live?token=x", "rtsp://cam/live?token=***"},
      {"stream door: rtsp://u:p@10.0.0.7/s: connection refused", "stream door: rtsp://***@10.0.0.7/s: connection refused"},
      {"{\"source\":\"rtsp://u:p@h/s\",\"x\":1}", "{\"source\":\"rtsp://***@h/s\",\"x\":1}"},
      {"rtsp://u:pa/ss@h/s", "rtsp://***@h/s"},  // an unescaped '/' in the password
      {"http://proxy/?url=rtsp://u:p@cam/s", "http://proxy/?url=rtsp://***@cam/s"},
      {"a://b@c and d://e:f@g", "a://***@c and d://***@g"},
      {"http://host/path/@name", "http://host/path/@name"},             // an '@' in a path is not a user
      {"http://host:8080/path/@name", "http://***@name"},               // (after a port: redacted, to be safe)
      {"rtsp://u:pa?ss@cam/live", "rtsp://***@cam/live"},               // '?' in a password
      {"rtsp://u:1234/5@cam/live", "rtsp://***@cam/live"},              // digits and '/'
      {"srt://cam:7001?mode=caller&passphrase=abc&streamid=x", "srt://cam:7001?mode=caller&passphrase=***&streamid=***"},
      {"https://b.s3/o?X-Amz-Signature=ff&X-Amz-Credential=k&x=1", "https://b.s3/o?X-Amz-Signature=***&X-Amz-Credential=***&x=1"},
      {"file:///videos/a.mp4", "file:///videos/a.mp4"},
      {"no uri here: user:pass@host", "no uri here: user:pass@host"},
      {"://weird", "://weird"},
      {"", ""},
  };
  for (const auto& [text, want] : cases) {
    CAPTURE(text);
    CHECK(redact_credentials(text) == want);
  }
}

TEST_CASE("stream names the app uses for its own files are refused") {
  for (const char* name : {"index.jsonl", "events.jsonl", "collect.jsonl", "cam.tmp", "x.partial", "INDEX.JSONL"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(parse_input(Config{}, fmt::format(R"({{"name": "{}", "kind": "test"}})", name), "request"),
                         doctest::Contains("its own files"), ConfigError);
  }
  CHECK_NOTHROW(parse_input(Config{}, R"({"name": "index", "kind": "test"})", "request"));
}

namespace {
// The message of the ConfigError that validating `yaml` throws ("" if it is valid).
std::string invalid(const std::string& yaml) {
  try {
    Config c = parse_config(yaml, "test.yaml");
    validate(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("regions and models: boxes in pixels or fractions, each region's model by name, every error named") {
  const std::string models = "models:\n  gate_state: {weights: /m/gate.safetensors, input_size: 64}\n"
                             "  default: {top_k: 3}\n";
  Config c = parse_config(models + "inputs:\n"
                                   "  - name: front\n    kind: test\n    whole: true\n    regions:\n"
                                   "      - {name: gate, box: [10, 20, 100, 50], model: gate_state, every: 15}\n"
                                   "      - {name: mat, box: [0.5, 0.5, 0.25, 0.5]}\n"
                                   "  - {name: back, kind: test}\n");
  validate(c);
  REQUIRE(c.inputs[0].regions.size() == 2);
  const auto& gate = c.inputs[0].regions[0];
  CHECK(gate.model == "gate_state");
  CHECK(gate.every == 15);
  CHECK_FALSE(gate.fractions());
  CHECK(c.inputs[0].regions[1].fractions());
  CHECK(c.inputs[0].regions[1].model == "default");
  CHECK(c.inputs[0].whole);
  CHECK(c.inputs[1].regions.empty());
  CHECK(c.model.top_k == 3);  // models.default is model:
  REQUIRE(c.models.count("gate_state"));
  CHECK(c.models.at("gate_state").input_size == 64);
  CHECK(models_in_use(c) == std::vector<std::string>{"default", "gate_state"});
  // The configuration as the gate model sees it: its section as model:, its keys set as model.KEY.
  const Config g = for_model(c, "gate_state");
  CHECK(g.model.input_size == 64);
  CHECK(g.model.weights == "/m/gate.safetensors");
  CHECK(g.is_set("model.input_size"));
  CHECK_FALSE(g.is_set("model.top_k"));  // (model:'s own keys are not this model's)
  CHECK_THROWS_AS(for_model(c, "nope"), ConfigError);
  // Pixels and fractions into pixels of a 640x480 picture; a box outside it gives nothing.
  auto px = region_pixels(gate, 640, 480);
  REQUIRE(px);
  CHECK((px->x == 10 && px->y == 20 && px->width == 100 && px->height == 50));
  px = region_pixels(c.inputs[0].regions[1], 640, 480);
  REQUIRE(px);
  CHECK((px->x == 320 && px->y == 240 && px->width == 160 && px->height == 240));
  CHECK_FALSE(region_pixels(gate, 100, 60));
  CHECK(region_outside(gate, 100, 60) == "region 'gate': box [10, 20, 100, 50] is not inside the 100x60 picture");
  // The whole configuration round-trips through its YAML.
  Config again = parse_config(to_yaml(c));
  CHECK(again.inputs[0].regions == c.inputs[0].regions);
  CHECK(again.models.at("gate_state").input_size == 64);

  // Errors name the key.
  const std::string stream = "input:\n  kind: test\n  regions:\n";
  CHECK(invalid(stream + "    - {name: gate, box: [0, 0, 10, 10], model: gate_state}\n")
            .find("input.regions[0].model: 'gate_state' is not a model of models: (known: default)") != std::string::npos);
  CHECK(invalid(stream + "    - {name: a, box: [0, 0, 10, 10]}\n    - {name: a, box: [5, 5, 10, 10]}\n")
            .find("input.regions[1].name: 'a' names two regions") != std::string::npos);
  CHECK(invalid(stream + "    - {name: a, box: [0.5, 0, 0.75, 1]}\n").find("as fractions must lie within the picture") !=
        std::string::npos);
  CHECK(invalid("input:\n  kind: test\n  width: 320\n  height: 240\n  regions:\n    - {name: a, box: [300, 0, 40, 10]}\n")
            .find("input.regions[0].box: region 'a': box [300, 0, 40, 10] is not inside the 320x240 picture") != std::string::npos);
  CHECK(rejection(stream + "    - {name: a, box: [0, 0, 10]}\n").find("box: expected a list of 4 numbers") != std::string::npos);
  CHECK(rejection(stream + "    - {name: a, box: [0, 0, 0, 10]}\n").find("width and height must be more than 0") != std::string::npos);
  CHECK(rejection(stream + "    - {name: a, box: [0, 0, 5, 5], evry: 2}\n").find("unknown key (did you mean every?)") !=
        std::string::npos);
  CHECK(rejection(stream + "    - {box: [0, 0, 5, 5]}\n").find("a region needs a name") != std::string::npos);
  CHECK(rejection(stream + "    - {name: a}\n").find("a region needs a box") != std::string::npos);
  CHECK(invalid(stream + "    - {name: 'a/b', box: [0, 0, 5, 5]}\n").find("must be 1-64 letters") != std::string::npos);
  CHECK(rejection("models:\n  gate: {wieghts: x}\n").find("models.gate.wieghts: unknown key (did you mean weights?)") !=
        std::string::npos);
  CHECK(rejection("models: [a, b]\n").find("expected a mapping of model names") != std::string::npos);
  // A rule may watch regions.
  c = parse_config("events:\n  rules:\n    - {name: open, labels: [open], regions: [gate]}\n");
  CHECK(c.events.rules.at(0).regions == std::vector<std::string>{"gate"});
  // A stream of a request body is checked the same way.
  CHECK_THROWS_WITH_AS(parse_input(Config{}, R"({"name": "x", "kind": "test", "regions": [{"name": "g", "box": [0, 0, 5, 5], "model": "m"}]})", "request"),
                       doctest::Contains("'m' is not a model of models:"), ConfigError);
}

TEST_SUITE_END();
