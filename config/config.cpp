// The schema: one table binds every key path to its field, type, range and description. Parsing, overrides,
// documentation and YAML output all walk that table, so a key is declared exactly once.
#include "config/config.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "config/errors.hpp"

namespace vc::config {
namespace {

// Where a value came from, for error messages: "file.yaml:3:7" or "--set a.b=c".
std::string where(const std::string& origin, const YAML::Node& node, bool has_marks) {
  if (!has_marks || node.Mark().is_null()) return origin;
  return fmt::format("{}:{}:{}", origin, node.Mark().line + 1, node.Mark().column + 1);
}

[[noreturn]] void reject(const std::string& at, const std::string& path, const std::string& why) {
  throw ConfigError(fmt::format("{}: {}: {}", at, path, why));
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing (null)";
    default: return fmt::format("'{}'", node.Scalar());
  }
}

struct Field {
  std::string path;
  std::string description;
  // Converts and validates `node` into the bound field; `at` locates it for errors.
  std::function<void(const YAML::Node& node, const std::string& at)> set;
  std::function<YAML::Node()> get;
};

template <typename T>
T scalar_as(const YAML::Node& node, const std::string& at, const std::string& path, const char* type_name) {
  if (!node.IsScalar()) reject(at, path, fmt::format("expected {}, got {}", type_name, describe(node)));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    reject(at, path, fmt::format("expected {}, got {}", type_name, describe(node)));
  }
}

Field text(std::string path, std::string* field, std::string description,
           std::vector<std::string> allowed = {}) {
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(*field); }};
  f.set = [field, allowed, p = f.path](const YAML::Node& node, const std::string& at) {
    auto value = scalar_as<std::string>(node, at, p, "a string");
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      reject(at, p, fmt::format("'{}' is not one of: {}", value, fmt::join(allowed, ", ")));
    }
    *field = std::move(value);
  };
  if (!allowed.empty()) f.description += fmt::format(" ({})", fmt::join(allowed, " | "));
  return f;
}

template <typename T>
Field number(std::string path, T* field, T lo, T hi, std::string description) {
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(*field); }};
  f.set = [field, lo, hi, p = f.path](const YAML::Node& node, const std::string& at) {
    const T value = scalar_as<T>(node, at, p, std::is_integral_v<T> ? "an integer" : "a number");
    if (!(value >= lo && value <= hi)) reject(at, p, fmt::format("{} is out of range [{}, {}]", value, lo, hi));
    *field = value;
  };
  return f;
}

Field boolean(std::string path, bool* field, std::string description) {
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(*field); }};
  f.set = [field, p = f.path](const YAML::Node& node, const std::string& at) {
    *field = scalar_as<bool>(node, at, p, "true or false");
  };
  return f;
}

template <typename T>
Field triple(std::string path, std::array<T, 3>* field, T lo, T hi, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field] {
    YAML::Node n(YAML::NodeType::Sequence);
    for (T v : *field) n.push_back(v);
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, lo, hi, p = f.path](const YAML::Node& node, const std::string& at) {
    if (!node.IsSequence() || node.size() != 3) {
      reject(at, p, fmt::format("expected a list of 3 numbers, got {}", describe(node)));
    }
    std::array<T, 3> value{};
    for (size_t i = 0; i < 3; ++i) {
      value[i] = scalar_as<T>(node[i], at, fmt::format("{}[{}]", p, i), std::is_integral_v<T> ? "an integer" : "a number");
      if (!(value[i] >= lo && value[i] <= hi)) {
        reject(at, fmt::format("{}[{}]", p, i), fmt::format("{} is out of range [{}, {}]", value[i], lo, hi));
      }
    }
    *field = value;
  };
  return f;
}

Field int_map(std::string path, std::map<std::string, int>* field, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field] {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [k, v] : *field) n[k] = v;
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, p = f.path](const YAML::Node& node, const std::string& at) {
    if (node.IsNull()) return field->clear();
    if (!node.IsMap()) reject(at, p, fmt::format("expected a mapping of name: number, got {}", describe(node)));
    std::map<std::string, int> value;
    for (const auto& kv : node) {
      const auto key = kv.first.as<std::string>();
      value[key] = scalar_as<int>(kv.second, at, p + "." + key, "an integer");
      if (value[key] < 0) reject(at, p + "." + key, "an algorithm number is >= 0");
    }
    *field = std::move(value);
  };
  return f;
}

std::vector<Field> schema(Config& c) {
  auto& i = c.input;
  auto& o = c.output;
  auto& m = c.model;
  auto& n = c.inference;
  auto& v = c.overlay;
  return {
      text("input.kind", &i.kind, "where frames come from", {"webcam", "file", "uri", "image", "test"}),
      text("input.device", &i.device, "webcam: V4L2 device path"),
      text("input.path", &i.path, "file: video file; image: image file, directory or glob"),
      text("input.uri", &i.uri, "uri: rtsp://, http(s):// or file:// address"),
      text("input.pattern", &i.pattern, "test: videotestsrc pattern (smpte, ball, snow, …)"),
      number("input.width", &i.width, 0, 16384, "requested width in pixels; 0 = the source's own"),
      number("input.height", &i.height, 0, 16384, "requested height in pixels; 0 = the source's own"),
      number("input.fps", &i.fps, 0.0, 1000.0, "requested frame rate; 0 = the source's own"),
      boolean("input.loop", &i.loop, "file/image: start again at the end"),
      text("input.drop", &i.drop, "frame-drop policy: auto drops for live sources and never for files",
           {"auto", "drop", "block"}),
      number<int64_t>("input.max_frames", &i.max_frames, 0, INT64_MAX, "stop after this many frames; 0 = no limit"),

      text("output.kind", &o.kind, "where labelled video goes", {"file", "display", "rtsp", "none"}),
      text("output.path", &o.path, "file: output video (.mp4 or .mkv)"),
      text("output.codec", &o.codec, "file/rtsp: H.264 encoder", {"auto", "x264", "nvh264"}),
      number("output.bitrate_kbps", &o.bitrate_kbps, 100, 200000, "encoder bitrate in kbit/s"),
      text("output.rtsp_address", &o.rtsp_address, "rtsp: address to listen on; 0.0.0.0 = all interfaces"),
      number("output.rtsp_port", &o.rtsp_port, 1, 65535, "rtsp: server port"),
      text("output.rtsp_path", &o.rtsp_path, "rtsp: mount point, e.g. /classify"),
      text("output.results", &o.results, "JSON-lines results file; empty = none, - = stdout"),

      text("model.weights", &m.weights, "ResNet weights (.safetensors, torchvision/timm names)"),
      text("model.labels", &m.labels, "class names, one per line"),
      text("model.architecture", &m.architecture, "network; auto = inferred from the weights",
           {"auto", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
            "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"}),
      number("model.input_size", &m.input_size, 16, 1024, "square model input size in pixels"),
      text("model.resize", &m.resize, "how frames are fitted to the input", {"stretch", "crop", "letterbox"}),
      number("model.crop_ratio", &m.crop_ratio, 0.1, 1.0, "crop: input_size / shorter side after resize"),
      triple("model.mean", &m.mean, -10.0, 10.0, "per-channel mean (RGB, 0..1 units)"),
      triple("model.std", &m.std, 1e-6, 10.0, "per-channel standard deviation (RGB, 0..1 units)"),
      number("model.top_k", &m.top_k, 1, 100, "labels reported per frame"),
      number("model.bn_eps", &m.bn_eps, 0.0, 1.0, "BatchNorm epsilon used when folding"),

      text("inference.device", &n.device, "engine: cuda (cuDNN) or cpu (reference); auto picks cuda if usable",
           {"auto", "cuda", "cpu"}),
      number("inference.gpu_id", &n.gpu_id, 0, 63, "CUDA device ordinal"),
      number("inference.batch_size", &n.batch_size, 1, 1024, "most frames per forward pass"),
      text("inference.precision", &n.precision, "stem/classifier precision: strict FP32, or TF32 in the stem",
           {"strict", "tf32_stem"}),
      boolean("inference.autotune", &n.autotune, "time cuDNN algorithms on the real shapes at start-up"),
      text("inference.autotune_cache", &n.autotune_cache, "algorithm cache file; empty = no cache"),
      number("inference.workspace_mb", &n.workspace_mb, 0, 65536, "cuDNN workspace limit in MiB"),
      boolean("inference.deterministic", &n.deterministic, "use only deterministic algorithms"),
      boolean("inference.cuda_graph", &n.cuda_graph, "capture the forward pass in a CUDA graph"),
      int_map("inference.algorithms", &n.algorithms, "per-layer cuDNN algorithm override, e.g. {layer1.0.conv1: 1}"),
      number("inference.cpu_threads", &n.cpu_threads, 0, 1024, "CPU engine threads; 0 = all cores"),

      boolean("overlay.enabled", &v.enabled, "draw labels onto the output video"),
      number("overlay.font_scale", &v.font_scale, 0.1, 10.0, "text size"),
      text("overlay.position", &v.position, "panel corner", {"top-left", "top-right", "bottom-left", "bottom-right"}),
      triple("overlay.text_color", &v.text_color, 0, 255, "text colour [R, G, B]"),
      triple("overlay.bar_color", &v.bar_color, 0, 255, "confidence bar colour [R, G, B]"),
      triple("overlay.background_color", &v.background_color, 0, 255, "panel colour [R, G, B]"),
      number("overlay.background_alpha", &v.background_alpha, 0.0, 1.0, "panel opacity"),
      boolean("overlay.show_fps", &v.show_fps, "show frames per second"),
      boolean("overlay.show_latency", &v.show_latency, "show capture-to-output latency"),

      number("smoothing.window", &c.smoothing.window, 1, 1000, "EMA window in frames; 1 = no smoothing"),
      number("smoothing.threshold", &c.smoothing.threshold, 0.0, 1.0,
             "smoothed confidence under this is reported as uncertain"),

      text("logging.level", &c.logging.level, "log level",
           {"trace", "debug", "info", "warn", "error", "critical", "off"}),
      text("logging.file", &c.logging.file, "also write the log here; empty = stderr only"),
  };
}

std::string section_of(const std::string& path) { return path.substr(0, path.find('.')); }

// Applies one YAML document (a mapping of sections) onto `config`.
void apply_document(Config& config, const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) return;  // an empty file means "all defaults"
  if (!root.IsMap()) reject(where(origin, root, true), "<top level>", "expected a mapping of sections");
  auto fields = schema(config);
  std::vector<std::string> sections;
  for (const auto& f : fields) {
    if (std::find(sections.begin(), sections.end(), section_of(f.path)) == sections.end()) {
      sections.push_back(section_of(f.path));
    }
  }
  for (const auto& section : root) {
    const auto name = section.first.as<std::string>();
    const auto at = where(origin, section.first, true);
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      reject(at, name, fmt::format("unknown section (known: {})", fmt::join(sections, ", ")));
    }
    if (section.second.IsNull()) continue;
    if (!section.second.IsMap()) {
      reject(where(origin, section.second, true), name, "expected a mapping of keys, got " + describe(section.second));
    }
    for (const auto& kv : section.second) {
      const auto path = name + "." + kv.first.as<std::string>();
      auto field = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.path == path; });
      if (field == fields.end()) {
        std::vector<std::string> known;
        for (const auto& f : fields) {
          if (section_of(f.path) == name) known.push_back(f.path.substr(name.size() + 1));
        }
        reject(where(origin, kv.first, true), path, fmt::format("unknown key (known: {})", fmt::join(known, ", ")));
      }
      field->set(kv.second, where(origin, kv.second, true));
    }
  }
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}:{}: invalid YAML: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  Config config;
  apply_document(config, root, origin);
  return config;
}

Config load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NoInputError(fmt::format("cannot read config file '{}'", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_config(buffer.str(), path);
}

void apply_override(Config& config, const std::string& assignment) {
  const auto origin = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format("{}: expected key.path=value", origin));
  }
  const auto path = assignment.substr(0, eq);
  const auto value_text = assignment.substr(eq + 1);
  auto fields = schema(config);
  auto field = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.path == path; });
  if (field == fields.end()) throw ConfigError(fmt::format("{}: {}: unknown key", origin, path));
  YAML::Node value;
  try {
    value = value_text.empty() ? YAML::Node(std::string()) : YAML::Load(value_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}: {}: invalid value: {}", origin, path, e.msg));
  }
  field->set(value, origin);
}

std::vector<KeyDoc> describe_keys() {
  Config defaults;
  std::vector<KeyDoc> docs;
  for (const auto& f : schema(defaults)) {
    YAML::Emitter out;
    out << YAML::Flow << f.get();
    docs.push_back({f.path, out.c_str(), f.description});
  }
  return docs;
}

std::string to_yaml(const Config& config) {
  Config copy = config;
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& f : schema(copy)) {
    root[section_of(f.path)][f.path.substr(f.path.find('.') + 1)] = f.get();
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::string expand_home(const std::string& path) {
  if (path.rfind("~/", 0) != 0) return path;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + path.substr(1);
}

}  // namespace vc::config
