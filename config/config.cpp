// The schema: one table binds every key path to its field, type, range and description. Parsing, overrides,
// documentation and YAML output all walk that table, so a key is declared exactly once.
#include "config/config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "config/errors.hpp"

namespace vc::config {
namespace {

namespace fs = std::filesystem;

// ---- The names of every choice, once.

template <typename E>
struct Names {
  static const std::vector<std::pair<E, const char*>> table;
};
template <>
const std::vector<std::pair<InputKind, const char*>> Names<InputKind>::table = {
    {InputKind::Webcam, "webcam"}, {InputKind::File, "file"}, {InputKind::Uri, "uri"},
    {InputKind::Image, "image"},   {InputKind::Test, "test"}};
template <>
const std::vector<std::pair<DropPolicy, const char*>> Names<DropPolicy>::table = {
    {DropPolicy::Auto, "auto"}, {DropPolicy::Drop, "drop"}, {DropPolicy::Block, "block"}};
template <>
const std::vector<std::pair<Decoder, const char*>> Names<Decoder>::table = {
    {Decoder::Auto, "auto"}, {Decoder::Gpu, "gpu"}, {Decoder::Cpu, "cpu"}};
template <>
const std::vector<std::pair<OutputKind, const char*>> Names<OutputKind>::table = {
    {OutputKind::File, "file"}, {OutputKind::Images, "images"}, {OutputKind::Display, "display"},
    {OutputKind::Rtsp, "rtsp"}, {OutputKind::None, "none"}};
template <>
const std::vector<std::pair<Codec, const char*>> Names<Codec>::table = {
    {Codec::Auto, "auto"}, {Codec::X264, "x264"}, {Codec::Nvh264, "nvh264"}};
template <>
const std::vector<std::pair<Resize, const char*>> Names<Resize>::table = {
    {Resize::Stretch, "stretch"}, {Resize::Crop, "crop"}, {Resize::Letterbox, "letterbox"}};
template <>
const std::vector<std::pair<Device, const char*>> Names<Device>::table = {
    {Device::Auto, "auto"}, {Device::Cuda, "cuda"}, {Device::Cpu, "cpu"}};
template <>
const std::vector<std::pair<Precision, const char*>> Names<Precision>::table = {
    {Precision::Strict, "strict"}, {Precision::Tf32Stem, "tf32_stem"}};
template <>
const std::vector<std::pair<Corner, const char*>> Names<Corner>::table = {
    {Corner::TopLeft, "top-left"}, {Corner::TopRight, "top-right"},
    {Corner::BottomLeft, "bottom-left"}, {Corner::BottomRight, "bottom-right"}};
template <>
const std::vector<std::pair<Headline, const char*>> Names<Headline>::table = {
    {Headline::Smoothed, "smoothed"}, {Headline::Top1, "top1"}};

template <typename E>
const char* name_of(E v) {
  for (const auto& [e, n] : Names<E>::table) {
    if (e == v) return n;
  }
  return "?";
}

// ---- Errors that say where.

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

// A mapping key as text; keys that are lists or mappings are a configuration error, not a crash.
std::string key_text(const YAML::Node& key, const std::string& at, const std::string& parent) {
  if (!key.IsScalar()) reject(at, parent.empty() ? "<top level>" : parent, "a key must be a name, got " + describe(key));
  return key.Scalar();
}

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean top_k?)" when a known name is close to `wrong`, else "".
std::string did_you_mean(const std::string& wrong, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  auto squash = [](std::string s) {
    s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '_' || c == '-'; }), s.end());
    return s;
  };
  for (const auto& k : known) {
    const size_t d = squash(k) == squash(wrong) ? 0 : edit_distance(k, wrong);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  const size_t limit = std::max<size_t>(2, wrong.size() / 3);
  return !best.empty() && best_distance <= limit && best_distance < wrong.size() ? fmt::format(" (did you mean {}?)", best) : "";
}

// ---- The field types of the schema.

// The context a value is set in: where it came from (for errors) and the directory relative paths resolve in.
struct SetContext {
  std::string at;
  std::string base_dir;
};

struct Field {
  std::string path;
  std::string description;
  std::function<void(const YAML::Node& node, const SetContext& ctx)> set;
  std::function<YAML::Node()> get;
  bool is_text = false;  // a --set value is taken as text, not parsed as YAML
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

Field text(std::string path, std::string* field, std::string description, std::vector<std::string> allowed = {}) {
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(*field); }, true};
  f.set = [field, allowed, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    auto value = node.IsNull() ? std::string() : scalar_as<std::string>(node, ctx.at, p, "a string");
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      reject(ctx.at, p, fmt::format("'{}' is not one of: {}{}", value, fmt::join(allowed, ", "), did_you_mean(value, allowed)));
    }
    *field = std::move(value);
  };
  if (!allowed.empty()) f.description += fmt::format(" ({})", fmt::join(allowed, " | "));
  return f;
}

// A path: relative values given in a config file resolve against the file's directory. "-" (stdout),
// "~/…" and absolute paths are kept as they are.
Field path(std::string key, std::string* field, std::string description) {
  Field f = text(std::move(key), field, std::move(description));
  auto plain = f.set;
  f.set = [field, plain](const YAML::Node& node, const SetContext& ctx) {
    plain(node, ctx);
    if (!ctx.base_dir.empty() && !field->empty() && *field != "-" && field->rfind("~/", 0) != 0 &&
        fs::path(*field).is_relative()) {
      *field = (fs::path(ctx.base_dir) / *field).lexically_normal().string();
    }
  };
  return f;
}

template <typename E>
Field choice(std::string path, E* field, std::string description) {
  std::vector<std::string> names;
  for (const auto& [e, n] : Names<E>::table) names.emplace_back(n);
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(std::string(name_of(*field))); }, true};
  f.set = [field, names, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    const auto value = scalar_as<std::string>(node, ctx.at, p, "a name");
    for (const auto& [e, n] : Names<E>::table) {
      if (value == n) {
        *field = e;
        return;
      }
    }
    reject(ctx.at, p, fmt::format("'{}' is not one of: {}{}", value, fmt::join(names, ", "), did_you_mean(value, names)));
  };
  f.description += fmt::format(" ({})", fmt::join(names, " | "));
  return f;
}

// A number as YAML: doubles in their shortest exact form (0.485, not yaml-cpp's 0.48499999999999999).
template <typename T>
YAML::Node number_node(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return YAML::Node(fmt::format("{}", v));
  } else {
    return YAML::Node(v);
  }
}

template <typename T>
Field number(std::string path, T* field, T lo, T hi, std::string description) {
  Field f{std::move(path), std::move(description), {}, [field] { return number_node(*field); }};
  f.set = [field, lo, hi, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    const T value = scalar_as<T>(node, ctx.at, p, std::is_integral_v<T> ? "an integer" : "a number");
    if (!(value >= lo && value <= hi)) reject(ctx.at, p, fmt::format("{} is out of range [{}, {}]", value, lo, hi));
    *field = value;
  };
  return f;
}

Field boolean(std::string path, bool* field, std::string description) {
  Field f{std::move(path), std::move(description), {}, [field] { return YAML::Node(*field); }};
  f.set = [field, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    *field = scalar_as<bool>(node, ctx.at, p, "true or false");
  };
  return f;
}

template <typename T>
Field triple(std::string path, std::array<T, 3>* field, T lo, T hi, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field] {
    YAML::Node n(YAML::NodeType::Sequence);
    for (T v : *field) n.push_back(number_node(v));
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, lo, hi, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    if (!node.IsSequence() || node.size() != 3) {
      reject(ctx.at, p, fmt::format("expected a list of 3 numbers, got {}", describe(node)));
    }
    std::array<T, 3> value{};
    for (size_t i = 0; i < 3; ++i) {
      value[i] = scalar_as<T>(node[i], ctx.at, fmt::format("{}[{}]", p, i), std::is_integral_v<T> ? "an integer" : "a number");
      if (!(value[i] >= lo && value[i] <= hi)) {
        reject(ctx.at, fmt::format("{}[{}]", p, i), fmt::format("{} is out of range [{}, {}]", value[i], lo, hi));
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
  f.set = [field, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    if (node.IsNull()) return field->clear();
    if (!node.IsMap()) reject(ctx.at, p, fmt::format("expected a mapping of name: number, got {}", describe(node)));
    std::map<std::string, int> value;
    for (const auto& kv : node) {
      const auto key = key_text(kv.first, ctx.at, p);
      value[key] = scalar_as<int>(kv.second, ctx.at, p + "." + key, "an integer");
      if (value[key] < 0) reject(ctx.at, p + "." + key, "an algorithm number is >= 0");
    }
    *field = std::move(value);
  };
  return f;
}

// ---- The schema.

// The keys of one stream, under `prefix` ("input" or "inputs.N").
std::vector<Field> input_schema(Input& i, const std::string& prefix) {
  const auto k = [&](const char* key) { return prefix + "." + key; };
  return {
      text(k("name"), &i.name, "stream name in results, outputs and metrics; empty = stream0, stream1, …"),
      choice(k("kind"), &i.kind, "where frames come from"),
      text(k("device"), &i.device, "webcam: V4L2 device path"),
      path(k("path"), &i.path, "file: video file; image: image file, directory or glob"),
      text(k("uri"), &i.uri, "uri: rtsp://, http(s):// or file:// address"),
      text(k("pattern"), &i.pattern, "test: videotestsrc pattern (smpte, ball, snow, …)"),
      number(k("width"), &i.width, 0, 16384, "requested width in pixels; 0 = the source's own"),
      number(k("height"), &i.height, 0, 16384, "requested height in pixels; 0 = the source's own"),
      number(k("fps"), &i.fps, 0.0, 1000.0, "requested frame rate; 0 = the source's own"),
      boolean(k("loop"), &i.loop, "file/image: start again at the end"),
      boolean(k("realtime"), &i.realtime, "file: deliver frames at the file's own rate, like a camera (live)"),
      choice(k("drop"), &i.drop, "frame-drop policy: auto drops the stalest frame for live sources, never for files"),
      choice(k("decoder"), &i.decoder, "auto: NVDEC when available, else CPU; gpu: NVDEC or fail; cpu: never NVDEC"),
      number<int64_t>(k("max_frames"), &i.max_frames, 0, INT64_MAX, "stop after this many frames; 0 = no limit"),
      number(k("stall_timeout_s"), &i.stall_timeout_s, 0.0, 86400.0,
             "no frame for this long: a live source restarts, a file fails; 0 = never"),
      number(k("reconnect.attempts"), &i.reconnect.attempts, 0, 1000000,
             "live source: restarts after a failure or stall before it gives up; 0 = no limit"),
      number(k("reconnect.delay_s"), &i.reconnect.delay_s, 0.0, 3600.0, "first wait before a restart (doubles each time)"),
      number(k("reconnect.max_delay_s"), &i.reconnect.max_delay_s, 0.0, 3600.0, "longest wait between restarts"),
  };
}

// Every other key.
std::vector<Field> schema(Config& c) {
  auto& o = c.output;
  auto& m = c.model;
  auto& n = c.inference;
  auto& v = c.overlay;
  auto& q = c.mqtt;
  return {
      choice("output.kind", &o.kind, "where labelled video goes"),
      path("output.path", &o.path, "file: .mp4/.mkv/.mov ({stream} = one per stream); images: a directory"),
      boolean("output.tiled", &o.tiled, "all streams in one mosaic (file, display, rtsp)"),
      number("output.width", &o.width, 0, 16384, "output width; 0 = the frame's (mosaic: 1920)"),
      number("output.height", &o.height, 0, 16384, "output height; 0 = the frame's (mosaic: 1080)"),
      choice("output.codec", &o.codec, "file/rtsp: H.264 encoder (auto: NVENC if present, else x264)"),
      number("output.bitrate_kbps", &o.bitrate_kbps, 100, 200000, "encoder bitrate in kbit/s"),
      number("output.fragment_s", &o.fragment_s, 0.0, 3600.0,
             "MP4: write a fragment this often so a crash leaves a playable file; 0 = off"),
      text("output.rtsp_address", &o.rtsp_address, "rtsp: address to listen on; 0.0.0.0 = all interfaces"),
      number("output.rtsp_port", &o.rtsp_port, 1, 65535, "rtsp: server port"),
      text("output.rtsp_path", &o.rtsp_path, "rtsp: mount point, e.g. /classify"),
      path("output.results", &o.results, "JSON-lines results ({stream} = one file per stream); empty = none, - = stdout"),
      boolean("output.results_timing", &o.results_timing, "results lines carry the per-stage latency breakdown"),

      path("model.weights", &m.weights, "ResNet weights (.safetensors, torchvision/timm names); empty = bundled model"),
      path("model.labels", &m.labels, "class names, one per line; empty = the model file's own"),
      text("model.architecture", &m.architecture, "network; auto = inferred from the weights",
           {"auto", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
            "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"}),
      number("model.input_size", &m.input_size, 16, 1024, "square model input size in pixels"),
      choice("model.resize", &m.resize, "how frames are fitted to the input"),
      number("model.crop_ratio", &m.crop_ratio, 0.1, 1.0, "crop: input_size / shorter side after resize"),
      triple("model.mean", &m.mean, -10.0, 10.0, "per-channel mean (RGB, 0..1 units)"),
      triple("model.std", &m.std, 1e-6, 10.0, "per-channel standard deviation (RGB, 0..1 units)"),
      number("model.top_k", &m.top_k, 1, 100, "labels reported per frame"),
      number("model.bn_eps", &m.bn_eps, 0.0, 1.0, "BatchNorm epsilon used when folding"),

      choice("inference.device", &n.device, "engine: cuda (cuDNN) or cpu (reference); auto picks cuda if usable"),
      number("inference.gpu_id", &n.gpu_id, 0, 63, "CUDA device ordinal"),
      number("inference.batch_size", &n.batch_size, 1, 1024, "most frames per forward pass, from any streams"),
      number("inference.batch_timeout_ms", &n.batch_timeout_ms, 0.0, 10000.0,
             "longest wait to fill a batch once its first frame is there"),
      choice("inference.precision", &n.precision, "stem/classifier precision: strict FP32, or TF32 in the stem"),
      boolean("inference.autotune", &n.autotune, "time cuDNN algorithms on the real shapes at start-up"),
      path("inference.autotune_cache", &n.autotune_cache, "algorithm cache file; empty = no cache"),
      number("inference.workspace_mb", &n.workspace_mb, 0, 65536, "cuDNN workspace limit in MiB"),
      boolean("inference.deterministic", &n.deterministic, "use only deterministic algorithms"),
      boolean("inference.cuda_graph", &n.cuda_graph, "capture the forward pass in a CUDA graph"),
      int_map("inference.algorithms", &n.algorithms, "per-layer cuDNN algorithm override, e.g. {layer1.0.conv1: 1}"),
      number("inference.cpu_threads", &n.cpu_threads, 0, 1024, "CPU engine threads; 0 = all cores"),

      boolean("overlay.enabled", &v.enabled, "draw labels onto the output video"),
      choice("overlay.headline", &v.headline, "the big label: the smoothed label or this frame's top-1"),
      number("overlay.font_scale", &v.font_scale, 0.1, 10.0, "text size (scaled with the frame)"),
      choice("overlay.position", &v.position, "panel corner"),
      triple("overlay.text_color", &v.text_color, 0, 255, "text colour [R, G, B]"),
      triple("overlay.bar_color", &v.bar_color, 0, 255, "confidence bar colour [R, G, B]"),
      triple("overlay.background_color", &v.background_color, 0, 255, "panel colour [R, G, B]"),
      number("overlay.background_alpha", &v.background_alpha, 0.0, 1.0, "panel opacity"),
      boolean("overlay.show_fps", &v.show_fps, "show frames per second"),
      boolean("overlay.show_latency", &v.show_latency, "show capture-to-result latency"),

      number("smoothing.window", &c.smoothing.window, 1, 1000, "EMA window in frames; 1 = no smoothing"),
      number("smoothing.threshold", &c.smoothing.threshold, 0.0, 1.0,
             "smoothed confidence under this is reported as uncertain"),

      text("logging.level", &c.logging.level, "log level", {"trace", "debug", "info", "warn", "error", "critical", "off"}),
      path("logging.file", &c.logging.file, "also write the log here; empty = stderr only"),
      number("logging.perf_interval_s", &c.logging.perf_interval_s, 0.0, 3600.0,
             "a one-line performance report this often (live runs); 0 = off"),

      boolean("mqtt.enabled", &q.enabled, "publish results and events to an MQTT broker"),
      text("mqtt.host", &q.host, "broker host"),
      number("mqtt.port", &q.port, 1, 65535, "broker port (1883; 8883 with TLS)"),
      text("mqtt.topic_prefix", &q.topic_prefix, "topics: PREFIX/STREAM/result|event|state, PREFIX/status"),
      text("mqtt.client_id", &q.client_id, "client id; empty = video-classifier-HOST-PID"),
      number("mqtt.qos", &q.qos, 0, 1, "MQTT quality of service for results and events"),
      number("mqtt.result_interval_s", &q.result_interval_s, 0.0, 3600.0,
             "per-stream result messages at most this often; 0 = every frame"),
      text("mqtt.username", &q.username, "user name; empty = none"),
      path("mqtt.password_file", &q.password_file, "file holding the password (or set VC_MQTT_PASSWORD)"),
      path("mqtt.tls_ca_file", &q.tls_ca_file, "CA certificate (PEM): enables TLS"),
      path("mqtt.tls_cert_file", &q.tls_cert_file, "client certificate (PEM) for mutual TLS"),
      path("mqtt.tls_key_file", &q.tls_key_file, "client key (PEM) for mutual TLS"),
      boolean("mqtt.tls_insecure", &q.tls_insecure, "do not check the broker's host name (testing only)"),
      number("mqtt.keepalive_s", &q.keepalive_s, 5, 3600, "keep-alive interval"),
      number("mqtt.buffer_messages", &q.buffer_messages, 1, 10000000,
             "messages held while the broker is away; beyond, the oldest are dropped (counted)"),

      boolean("metrics.enabled", &c.metrics.enabled, "serve /metrics (Prometheus), /healthz and /readyz over HTTP"),
      text("metrics.address", &c.metrics.address, "address to listen on"),
      number("metrics.port", &c.metrics.port, 1, 65535, "HTTP port"),
      number("metrics.stall_s", &c.metrics.stall_s, 1.0, 86400.0,
             "/healthz fails when a running stream's last frame is older than this"),
  };
}

std::string section_of(const std::string& path) { return path.substr(0, path.find('.')); }

std::vector<std::string> section_names(const std::vector<Field>& fields) {
  std::vector<std::string> sections{"input", "inputs"};
  for (const auto& f : fields) {
    if (std::find(sections.begin(), sections.end(), section_of(f.path)) == sections.end()) {
      sections.push_back(section_of(f.path));
    }
  }
  return sections;
}

// Applies a mapping at key path `prefix` ("output", "input.reconnect", …) onto the fields under it.
void apply_mapping(std::vector<Field>& fields, const std::string& prefix, const YAML::Node& map, const std::string& origin,
                   const std::string& base_dir, Config& config) {
  if (map.IsNull()) return;
  if (!map.IsMap()) reject(where(origin, map, true), prefix, "expected a mapping of keys, got " + describe(map));
  for (const auto& kv : map) {
    const auto path = prefix + "." + key_text(kv.first, where(origin, kv.first, true), prefix);
    auto field = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.path == path; });
    if (field != fields.end()) {
      field->set(kv.second, {where(origin, kv.second, true), base_dir});
      config.explicit_keys.insert(path);
      continue;
    }
    const bool is_group = std::any_of(fields.begin(), fields.end(), [&](const Field& f) { return f.path.rfind(path + ".", 0) == 0; });
    if (is_group) {
      apply_mapping(fields, path, kv.second, origin, base_dir, config);
      continue;
    }
    std::vector<std::string> known;
    for (const auto& f : fields) {
      if (f.path.rfind(prefix + ".", 0) != 0) continue;
      const auto rest = f.path.substr(prefix.size() + 1);
      const auto key = rest.substr(0, rest.find('.'));
      if (std::find(known.begin(), known.end(), key) == known.end()) known.push_back(key);
    }
    const auto name = path.substr(prefix.size() + 1);
    reject(where(origin, kv.first, true), path,
           fmt::format("unknown key{} (known: {})", did_you_mean(name, known), fmt::join(known, ", ")));
  }
}

// The explicit keys of stream N are recorded as "input.KEY" too: a key set on any stream counts as set.
void record_input_keys(Config& config, const std::string& prefix) {
  std::vector<std::string> added;
  for (const auto& k : config.explicit_keys) {
    if (k.rfind(prefix + ".", 0) == 0) added.push_back("input." + k.substr(prefix.size() + 1));
  }
  config.explicit_keys.insert(added.begin(), added.end());
}

// Applies one YAML document (a mapping of sections) onto `config`.
void apply_document(Config& config, const YAML::Node& root, const std::string& origin, const std::string& base_dir) {
  if (!root || root.IsNull()) return;  // an empty file means "all defaults"
  if (!root.IsMap()) reject(where(origin, root, true), "<top level>", "expected a mapping of sections");
  auto fields = schema(config);
  const auto sections = section_names(fields);
  YAML::Node inputs_node;
  bool has_inputs = false;
  for (const auto& section : root) {
    const auto at = where(origin, section.first, true);
    const auto name = key_text(section.first, at, "");
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      reject(at, name, fmt::format("unknown section{} (known: {})", did_you_mean(name, sections), fmt::join(sections, ", ")));
    }
    if (name == "inputs") {
      inputs_node = section.second;
      has_inputs = true;
    } else if (name == "input") {
      auto input_fields = input_schema(config.input, "input");
      apply_mapping(input_fields, "input", section.second, origin, base_dir, config);
    } else {
      apply_mapping(fields, name, section.second, origin, base_dir, config);
    }
  }
  if (!has_inputs) {
    config.inputs = {config.input};
    return;
  }
  if (!inputs_node.IsSequence() || inputs_node.size() == 0) {
    reject(where(origin, inputs_node, true), "inputs", "expected a list of input sections, got " + describe(inputs_node));
  }
  config.inputs.clear();
  for (size_t i = 0; i < inputs_node.size(); ++i) {
    Input stream = config.input;  // `input:` gives every stream's defaults
    const auto prefix = fmt::format("inputs.{}", i);
    auto input_fields = input_schema(stream, prefix);
    apply_mapping(input_fields, prefix, inputs_node[i], origin, base_dir, config);
    record_input_keys(config, prefix);
    config.inputs.push_back(std::move(stream));
  }
}

// "inputs.2.path" / "inputs[2].path" -> (2, "path"); other paths -> nullopt.
std::optional<std::pair<size_t, std::string>> stream_key(const std::string& path) {
  std::string p = path;
  if (p.rfind("inputs[", 0) == 0) {
    const auto close = p.find(']');
    if (close == std::string::npos) return std::nullopt;
    p = "inputs." + p.substr(7, close - 7) + p.substr(close + 1);
  }
  if (p.rfind("inputs.", 0) != 0) return std::nullopt;
  const auto dot = p.find('.', 7);
  if (dot == std::string::npos) return std::nullopt;
  size_t index = 0;
  const auto digits = p.substr(7, dot - 7);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return std::pair{index, p.substr(dot + 1)};
}

std::vector<std::string> known_paths(const std::vector<Field>& fields, const std::vector<Field>& input_fields) {
  std::vector<std::string> known;
  for (const auto& f : fields) known.push_back(f.path);
  for (const auto& f : input_fields) known.push_back(f.path);
  return known;
}

}  // namespace

const char* name(InputKind v) { return name_of(v); }
const char* name(DropPolicy v) { return name_of(v); }
const char* name(Decoder v) { return name_of(v); }
const char* name(OutputKind v) { return name_of(v); }
const char* name(Codec v) { return name_of(v); }
const char* name(Resize v) { return name_of(v); }
const char* name(Device v) { return name_of(v); }
const char* name(Precision v) { return name_of(v); }
const char* name(Corner v) { return name_of(v); }
const char* name(Headline v) { return name_of(v); }

Config parse_config(const std::string& yaml_text, const std::string& origin, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}:{}: invalid YAML: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  Config config;
  try {
    apply_document(config, root, origin, base_dir);
  } catch (const YAML::Exception& e) {  // anything yaml-cpp rejects that the checks above did not name
    throw ConfigError(fmt::format("{}: {}", origin, e.what()));
  }
  return config;
}

Config load_config(const std::string& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) throw NoInputError(fmt::format("cannot read config file '{}': no such file", file));
  if (fs::is_directory(file, ec)) throw NoInputError(fmt::format("config file '{}' is a directory, not a YAML file", file));
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  if (!in || !(buffer << in.rdbuf())) {
    if (fs::file_size(file, ec) != 0 || ec) throw NoInputError(fmt::format("cannot read config file '{}'", file));
  }
  const auto dir = fs::absolute(fs::path(file), ec).parent_path().string();
  return parse_config(buffer.str(), file, dir);
}

void apply_override(Config& config, const std::string& assignment) {
  const auto origin = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format("{}: expected key.path=value", origin));
  }
  const auto key = assignment.substr(0, eq);
  const auto value_text = assignment.substr(eq + 1);
  auto fields = schema(config);
  Input scratch;
  const auto input_fields = input_schema(scratch, "input");

  // Which fields the assignment targets: one key, the key on every stream, or the key on one stream.
  std::vector<Field> targets;
  std::string canonical = key;
  if (auto sk = stream_key(key)) {
    if (sk->first >= config.inputs.size()) {
      throw ConfigError(fmt::format("{}: {}: there are {} stream(s) (inputs.0 .. inputs.{})", origin, key,
                                    config.inputs.size(), config.inputs.size() - 1));
    }
    for (auto& f : input_schema(config.inputs[sk->first], fmt::format("inputs.{}", sk->first))) {
      if (f.path == fmt::format("inputs.{}.{}", sk->first, sk->second)) targets.push_back(f);
    }
    canonical = "input." + sk->second;
  } else if (key.rfind("input.", 0) == 0) {
    for (auto& f : input_schema(config.input, "input")) {
      if (f.path == key) targets.push_back(f);
    }
    for (size_t i = 0; i < config.inputs.size() && !targets.empty(); ++i) {
      for (auto& f : input_schema(config.inputs[i], "input")) {
        if (f.path == key) targets.push_back(f);
      }
    }
  } else {
    for (auto& f : fields) {
      if (f.path == key) targets.push_back(f);
    }
  }
  if (targets.empty()) {
    throw ConfigError(fmt::format("{}: {}: unknown key{}", origin, key, did_you_mean(key, known_paths(fields, input_fields))));
  }

  YAML::Node value;
  const bool quoted = value_text.size() >= 2 && (value_text.front() == '"' || value_text.front() == '\'') &&
                      value_text.back() == value_text.front();
  try {
    if (targets.front().is_text && !quoted) {
      value = YAML::Node(value_text);  // text as typed: "-", "a: b" and "[x]" stay text
    } else {
      value = value_text.empty() ? YAML::Node(std::string()) : YAML::Load(value_text);
    }
    for (auto& f : targets) f.set(value, {origin, ""});
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}: {}: invalid value: {}", origin, key, e.msg));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}: invalid value: {}", origin, key, e.what()));
  }
  config.explicit_keys.insert(canonical);
}

std::vector<KeyDoc> describe_keys() {
  Config defaults;
  std::vector<KeyDoc> docs;
  auto add = [&](const Field& f) {
    YAML::Emitter out;
    out << YAML::Flow << f.get();
    docs.push_back({f.path, out.c_str(), f.description});
  };
  for (const auto& f : input_schema(defaults.input, "input")) add(f);
  for (const auto& f : schema(defaults)) add(f);
  return docs;
}

namespace {

// Sets root[a][b][c] from the dotted path "a.b.c" (below the section).
void put(YAML::Node node, const std::string& dotted, const YAML::Node& value) {
  const auto dot = dotted.find('.');
  if (dot == std::string::npos) {
    node[dotted] = value;
    return;
  }
  YAML::Node child = node[dotted.substr(0, dot)];
  put(child, dotted.substr(dot + 1), value);
}

YAML::Node input_node(Input& input) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& f : input_schema(input, "input")) put(n, f.path.substr(6), f.get());
  return n;
}

}  // namespace

std::string to_yaml(const Config& config) {
  Config copy = config;
  YAML::Node root(YAML::NodeType::Map);
  if (copy.inputs.size() == 1) {
    root["input"] = input_node(copy.inputs[0]);
  } else {
    for (auto& i : copy.inputs) root["inputs"].push_back(input_node(i));
  }
  for (const auto& f : schema(copy)) {
    YAML::Node section = root[section_of(f.path)];
    put(section, f.path.substr(f.path.find('.') + 1), f.get());
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::string expand_home(const std::string& p) {
  if (p.rfind("~/", 0) != 0) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + p.substr(1);
}

std::string for_stream(const std::string& path_template, const std::string& stream_name) {
  std::string out = path_template;
  for (auto at = out.find("{stream}"); at != std::string::npos; at = out.find("{stream}", at + stream_name.size())) {
    out.replace(at, 8, stream_name);
  }
  return out;
}

}  // namespace vc::config
