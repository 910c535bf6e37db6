// The schema: every key of the configuration, once, with its type, range and description (see schema.hpp).
#include "config/schema.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/errors.hpp"

namespace vc::config {
namespace detail {
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
const std::vector<std::pair<Live, const char*>> Names<Live>::table = {
    {Live::Auto, "auto"}, {Live::Yes, "true"}, {Live::No, "false"}};
template <>
const std::vector<std::pair<OnDamage, const char*>> Names<OnDamage>::table = {
    {OnDamage::Fail, "fail"}, {OnDamage::Warn, "warn"}};
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

}  // namespace

namespace {

// ---- The field types of the schema.

template <typename T>
T scalar_as(const YAML::Node& node, const std::string& at, const std::string& path, const char* type_name) {
  if (!node.IsScalar()) reject(at, path, fmt::format("expected {}, got {}", type_name, describe(node)));
  if constexpr (std::is_same_v<T, std::string>) return plain_text(node.Scalar(), at, path);
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

template <typename T, size_t N>
Field numbers(std::string path, std::array<T, N>* field, T lo, T hi, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field] {
    YAML::Node n(YAML::NodeType::Sequence);
    for (T v : *field) n.push_back(number_node(v));
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, lo, hi, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    if (!node.IsSequence() || node.size() != N) {
      reject(ctx.at, p, fmt::format("expected a list of {} numbers, got {}", N, describe(node)));
    }
    std::array<T, N> value{};
    for (size_t i = 0; i < N; ++i) {
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

Field string_list(std::string path, std::vector<std::string>* field, std::string description);

// inference.gpus: a list of CUDA device ordinals, or "all".
Field gpu_list(std::string path, std::vector<int>* field, bool* all, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field, all] {
    if (*all) return YAML::Node(std::string("all"));
    YAML::Node n(YAML::NodeType::Sequence);
    for (int v : *field) n.push_back(v);
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, all, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    *all = node.IsScalar() && node.Scalar() == "all";
    field->clear();
    if (node.IsNull() || *all) return;
    if (!node.IsSequence()) reject(ctx.at, p, fmt::format("expected a list of GPU numbers such as [0, 1], or all; got {}", describe(node)));
    for (size_t i = 0; i < node.size(); ++i) {
      const auto at = fmt::format("{}[{}]", p, i);
      field->push_back(scalar_as<int>(node[i], where(ctx.origin, node[i], true), at, "a GPU number"));
      if (field->back() < 0 || field->back() > 63) reject(ctx.at, at, fmt::format("{} is out of range [0, 63]", field->back()));
    }
  };
  return f;
}

// A list of folders: each relative one taken from the config file's folder, as path() does.
Field path_list(std::string key, std::vector<std::string>* field, std::string description) {
  Field f = string_list(std::move(key), field, std::move(description));
  auto plain = f.set;
  f.set = [field, plain](const YAML::Node& node, const SetContext& ctx) {
    plain(node, ctx);
    for (auto& p : *field) {
      if (!ctx.base_dir.empty() && !p.empty() && p.rfind("~/", 0) != 0 && fs::path(p).is_relative()) {
        p = (fs::path(ctx.base_dir) / p).lexically_normal().string();
      }
    }
  };
  return f;
}

Field string_list(std::string path, std::vector<std::string>* field, std::string description) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field] {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& v : *field) n.push_back(v);
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  };
  f.set = [field, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    if (node.IsNull()) return field->clear();
    if (node.IsScalar()) {  // one name alone
      *field = {plain_text(node.Scalar(), ctx.at, p)};
      return;
    }
    if (!node.IsSequence()) reject(ctx.at, p, fmt::format("expected a list of names, got {}", describe(node)));
    std::vector<std::string> value;
    for (size_t i = 0; i < node.size(); ++i) {
      value.push_back(scalar_as<std::string>(node[i], where(ctx.origin, node[i], true), fmt::format("{}[{}]", p, i), "a name"));
    }
    *field = std::move(value);
  };
  return f;
}

// The keys of one event rule.
std::vector<Field> rule_fields(EventRule& r) {
  return {
      text("name", &r.name, "the rule's name (events, clips and topics carry it)"),
      string_list("labels", &r.labels, "the labels that make it hold (any of them, as the smoothed label; '*' = any label)"),
      string_list("streams", &r.streams, "the streams it watches; empty = every stream"),
      string_list("regions", &r.regions, "the regions it watches (by name); empty = the whole picture"),
      number("min_confidence", &r.min_confidence, 0.0, 1.0, "the smoothed score a label must have"),
      number("min_duration_s", &r.min_duration_s, 0.0, 3600.0, "how long it must hold before an event opens"),
      number("cooldown_s", &r.cooldown_s, 0.0, 86400.0, "after an event ends, how long before the next may open"),
      number("max_duration_s", &r.max_duration_s, 1.0, 86400.0, "an event open this long is ended"),
  };
}

// The keys of one region.
std::vector<Field> region_fields(Region& r) {
  return {
      text("name", &r.name, "the region's name (its results, events, topics and metrics carry it)"),
      numbers("box", &r.box, 0.0, 16384.0, "[x, y, width, height] in pixels of the picture as shown (after rotation), "
                                           "or all four 0-1: fractions of it"),
      text("model", &r.model, "the model that classifies it: a name of models: (default = model:)"),
      number("every", &r.every, 1, 100000, "classify every Nth frame (a slow-changing state needs 1-2 a second)"),
  };
}

// A list of mappings (events.rules, input.regions): each item's keys are keys_of(item); `complete` rejects an item
// that lacks what it needs. `plural` names the items ("rules"), `one` shows what one looks like.
template <typename T>
Field mapping_list(std::string path, std::vector<T>* field, std::string description, std::vector<Field> (*keys_of)(T&),
                   const char* plural, const char* one,
                   void (*complete)(const T&, const YAML::Node&, const std::string& at, const std::string& key)) {
  Field f{std::move(path), std::move(description), {}, {}};
  f.get = [field, keys_of] {
    YAML::Node n(YAML::NodeType::Sequence);
    for (auto item : *field) {
      YAML::Node m(YAML::NodeType::Map);
      for (const auto& k : keys_of(item)) m[k.path] = k.get();
      m.SetStyle(YAML::EmitterStyle::Flow);
      n.push_back(m);
    }
    return n;
  };
  f.set = [field, keys_of, plural, one, complete, p = f.path](const YAML::Node& node, const SetContext& ctx) {
    if (node.IsNull()) return field->clear();
    if (!node.IsSequence()) reject(ctx.at, p, fmt::format("expected a list of {}, got {}", plural, describe(node)));
    std::vector<T> items;
    for (size_t i = 0; i < node.size(); ++i) {
      const auto key = fmt::format("{}[{}]", p, i);
      const YAML::Node& item = node[i];
      const auto at = where(ctx.origin, item, true);
      if (!item.IsMap()) reject(at, key, fmt::format("expected {}, got {}", one, describe(item)));
      T value;
      auto fields = keys_of(value);
      std::vector<std::string> known;
      for (const auto& k : fields) known.push_back(k.path);
      for (const auto& kv : item) {
        const auto name = key_text(kv.first, at, key);
        auto match = std::find_if(fields.begin(), fields.end(), [&](const Field& k) { return k.path == name; });
        if (match == fields.end()) {
          reject(where(ctx.origin, kv.first, true), key + "." + name,
                 fmt::format("unknown key{} (known: {})", did_you_mean(name, known), fmt::join(known, ", ")));
        }
        match->set(kv.second, {where(ctx.origin, kv.second, true), ctx.base_dir, ctx.origin});
      }
      complete(value, item, at, key);
      items.push_back(std::move(value));
    }
    *field = std::move(items);
  };
  return f;
}

void complete_rule(const EventRule& rule, const YAML::Node&, const std::string& at, const std::string& key) {
  if (rule.name.empty()) reject(at, key + ".name", "a rule needs a name");
  if (rule.labels.empty()) reject(at, key + ".labels", "a rule needs at least one label");
}

void complete_region(const Region& region, const YAML::Node& item, const std::string& at, const std::string& key) {
  if (region.name.empty()) reject(at, key + ".name", "a region needs a name");
  if (!item["box"]) reject(at, key + ".box", "a region needs a box: [x, y, width, height]");
  if (region.box[2] <= 0 || region.box[3] <= 0) reject(at, key + ".box", "the box's width and height must be more than 0");
}

}  // namespace

// ---- The schema.

std::vector<Field> model_fields(Model& m, const std::string& prefix) {
  const auto k = [&](const char* key) { return prefix + "." + key; };
  return {
      path(k("weights"), &m.weights, "ResNet weights (.safetensors, torchvision/timm names); empty = bundled model"),
      path(k("labels"), &m.labels, "class names, one per line; empty = the model file's own"),
      text(k("architecture"), &m.architecture, "network; auto = inferred from the weights",
           {"auto", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
            "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2"}),
      number(k("input_size"), &m.input_size, 16, 1024, "square model input size in pixels"),
      choice(k("resize"), &m.resize, "how frames are fitted to the input"),
      number(k("crop_ratio"), &m.crop_ratio, 0.1, 1.0, "crop: input_size / shorter side after resize"),
      numbers(k("mean"), &m.mean, -10.0, 10.0, "per-channel mean (RGB, 0..1 units)"),
      numbers(k("std"), &m.std, 1e-6, 10.0, "per-channel standard deviation (RGB, 0..1 units)"),
      number(k("top_k"), &m.top_k, 1, 100, "labels reported per frame"),
      number(k("bn_eps"), &m.bn_eps, 0.0, 1.0, "BatchNorm epsilon used when folding")
  };
}

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
      choice(k("on_damage"), &i.on_damage,
             "a file some of whose frames could not be decoded or were decoded from damaged data: fail (exit 65 after "
             "classifying what decodes) or warn (exit 0; the summary and the results' \"damaged\" flags say so)"),
      choice(k("live"), &i.live,
             "live sources drop stale frames and restart when they end; finite ones end, never drop (auto: cameras, "
             "test patterns, rtsp/rtmp/udp/srt are live; files and http(s) are finite, unless the server gives no "
             "duration)"),
      choice(k("drop"), &i.drop, "frame-drop policy: auto drops the stalest frame for live sources, never for files"),
      choice(k("decoder"), &i.decoder, "auto: NVDEC when available, else CPU; gpu: NVDEC or fail; cpu: never NVDEC"),
      number<int64_t>(k("max_frames"), &i.max_frames, 0, INT64_MAX, "stop after this many frames classified (a live source's dropped frames do not count); 0 = no limit"),
      number(k("stall_timeout_s"), &i.stall_timeout_s, 0.0, 86400.0,
             "no frame for this long: a live source restarts, a file fails; 0 = never"),
      number(k("start_timeout_s"), &i.start_timeout_s, 0.0, 86400.0,
             "from a source's start or restart to its first frame, the wait before it counts as stalled (an RTSP "
             "handshake, many streams starting at once); the longer of this and stall_timeout_s; 0 = stall_timeout_s"),
      number(k("reconnect.attempts"), &i.reconnect.attempts, 0, 1000000,
             "live source: restarts after a failure or stall before it gives up; 0 = no limit"),
      number(k("reconnect.delay_s"), &i.reconnect.delay_s, 0.0, 3600.0, "first wait before a restart (doubles each time)"),
      number(k("reconnect.max_delay_s"), &i.reconnect.max_delay_s, 0.0, 3600.0, "longest wait between restarts"),
      mapping_list(k("regions"), &i.regions,
                   "parts of the picture classified on their own: [{name, box: [x, y, w, h], model, every}]; none = "
                   "the whole picture", region_fields, "regions", "a region: {name, box: [x, y, w, h], model, every}",
                   complete_region),
      boolean(k("whole"), &i.whole, "with regions: classify the whole picture too (by model:)"),
  };
}

std::vector<Field> schema(Config& c) {
  auto& o = c.output;
  auto& m = c.model;
  auto& n = c.inference;
  auto& v = c.overlay;
  auto& q = c.mqtt;
  std::vector<Field> fields = {
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
      path("output.collect.dir", &o.collect_dir,
           "frames the model is unsure about, saved for review: DIR/PREDICTED/*.jpg and collect.jsonl; empty = off"),
      number("output.collect.below_confidence", &o.collect_below, 0.0, 1.0,
             "collect a frame whose top-1 confidence is below this"),
      number("output.collect.max_per_minute", &o.collect_per_minute, 0.01, 6000.0,
             "at most this many collected frames per stream per minute of stream time"),
      number("output.collect.max_frames", &o.collect_max_frames, 1, 100000,
             "frames waiting for review at most: beyond, the oldest are dropped first (counted)"),

  };
  for (auto& f : model_fields(m, "model")) fields.push_back(std::move(f));
  for (auto& [name, model] : c.models) {
    for (auto& f : model_fields(model, "models." + name)) fields.push_back(std::move(f));
  }
  std::vector<Field> rest = {
      choice("inference.device", &n.device, "engine: cuda (cuDNN) or cpu (reference); auto picks cuda if usable"),
      number("inference.gpu_id", &n.gpu_id, 0, 63, "CUDA device ordinal (one GPU)"),
      gpu_list("inference.gpus", &n.gpus, &n.all_gpus,
               "several GPUs in one process, e.g. [0, 1] or all: an engine on each, every stream decoded and classified "
               "on one of them (the least busy when it starts); [] = inference.gpu_id alone"),
      number("inference.batch_size", &n.batch_size, 1, 1024, "most frames per forward pass, from any streams"),
      number("inference.batch_timeout_ms", &n.batch_timeout_ms, 0.0, 10000.0, "longest wait to fill a batch's frames"),
      choice("inference.precision", &n.precision, "stem/classifier precision: strict FP32, or TF32 in the stem"),
      boolean("inference.autotune", &n.autotune, "time cuDNN algorithms on the real shapes at start-up"),
      path("inference.autotune_cache", &n.autotune_cache, "algorithm cache file; empty = no cache"),
      boolean("inference.tune_in_background", &n.tune_in_background,
              "with autotune: classify at once, switch to the tuned engine once built beside it (false: tune first)"),
      number("inference.workspace_mb", &n.workspace_mb, 0, 65536, "cuDNN workspace limit in MiB"),
      boolean("inference.deterministic", &n.deterministic, "use only deterministic algorithms"),
      boolean("inference.cuda_graph", &n.cuda_graph, "capture the forward pass in a CUDA graph"),
      int_map("inference.algorithms", &n.algorithms, "per-layer cuDNN algorithm override, e.g. {layer1.0.conv1: 1}"),
      number("inference.cpu_threads", &n.cpu_threads, 0, 1024, "CPU engine threads; 0 = all cores"),

      boolean("overlay.enabled", &v.enabled, "draw labels onto the output video"),
      choice("overlay.headline", &v.headline,
             "the big label: this frame's top-1 (with the smoothed label, marked stable, while they differ) or the "
             "smoothed label"),
      number("overlay.font_scale", &v.font_scale, 0.1, 10.0, "text size (scaled with the frame)"),
      choice("overlay.position", &v.position, "panel corner"),
      numbers("overlay.text_color", &v.text_color, 0, 255, "text colour [R, G, B]"),
      numbers("overlay.bar_color", &v.bar_color, 0, 255, "confidence bar colour [R, G, B]"),
      numbers("overlay.background_color", &v.background_color, 0, 255, "panel colour [R, G, B]"),
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
      number("logging.progress_interval_s", &c.logging.progress_interval_s, 0.0, 3600.0,
             "files: a progress line (done, %, fps, ETA) this often when stderr is not a terminal (logs, pipes, "
             "systemd); 0 = off (a terminal shows it in place)"),

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

      path("events.dir", &c.events.dir, "where clips, snapshots and events.jsonl go (a folder per stream)"),
      mapping_list("events.rules", &c.events.rules,
                "rules that open events: [{name, labels: [...], streams: [...], min_confidence, min_duration_s, "
                "cooldown_s, max_duration_s}]; none = no events", rule_fields, "rules", "a rule: {name, labels, …}",
                complete_rule),
      number("events.pre_s", &c.events.pre_s, 0.0, 60.0, "seconds before an event's start that its clip holds"),
      number("events.post_s", &c.events.post_s, 0.0, 600.0, "seconds after its end that its clip holds"),
      number("events.release_s", &c.events.release_s, 0.0, 600.0,
             "an event ends only once its rule has not held for this long (one flicker does not split it)"),
      number("events.update_s", &c.events.update_s, 0.5, 3600.0, "an update message while an event is open, this often"),
      boolean("events.clips.enabled", &c.events.clips, "a clip per event: the stream's own packets, remuxed, no re-encode"),
      number("events.clips.buffer_mb", &c.events.buffer_mb, 1, 4096, "per stream: memory for the packets before an event"),
      boolean("events.snapshots.enabled", &c.events.snapshots, "a JPEG of each event's peak frame, and a thumbnail"),
      boolean("events.snapshots.clean", &c.events.snapshots_clean, "the snapshot without the overlay"),
      number("events.snapshots.thumbnail_px", &c.events.thumbnail_px, 32, 4096, "the thumbnail's width in pixels"),
      number("events.retain.days", &c.events.retain_days, 0.0, 36500.0,
             "delete the event files this app wrote once older than this; 0 = keep"),
      number("events.retain.max_gib", &c.events.retain_gib, 0.0, 1e6,
             "keep the event files this app wrote under this size, the oldest deleted first; 0 = no limit"),

      boolean("api.enabled", &c.api.enabled,
              "the REST API and the web page on the metrics server's port (streams added and removed while it runs; "
              "the run lasts until stopped)"),
      path("api.token_file", &c.api.token_file,
           "a file holding the bearer token every change needs (or VC_API_TOKEN); none: changes are refused"),
      boolean("api.protect_reads", &c.api.protect_reads, "reads need the token too"),
      path_list("api.allowed_dirs", &c.api.allowed_dirs, "the folders file and image inputs added over the API may read"),
      path("api.state_file", &c.api.state_file,
           "the streams as changed over the API, kept here: a restart starts them (empty = not kept)"),
      number("api.max_streams", &c.api.max_streams, 1, 4096, "the most streams at once, added ones included (a removed stream's place is used again)"),
      number("api.max_body_kb", &c.api.max_body_kb, 1, 1024, "the largest request body (KiB): larger is refused (413)"),
      number("api.rate_per_s", &c.api.rate_per_s, 0.1, 10000.0, "changes per second a client may make (beyond: 429)"),
      number("api.mjpeg_clients", &c.api.mjpeg_clients, 0, 256, "live.mjpeg viewers at once (beyond: 503)"),
      number("api.live_clients", &c.api.live_clients, 0, 4096,
             "live video viewers (live.mp4) at once in all, and as many result streams (beyond: 503)"),
      number("api.live_clients_per_stream", &c.api.live_clients_per_stream, 0, 1024,
             "live video viewers of one stream at once, and as many of its result streams (beyond: 503)"),
      number("api.snapshot_interval_s", &c.api.snapshot_interval_s, 0.05, 60.0,
             "a stream's snapshot is made at most this often; requests in between get the last one"),
      string_list("api.allowed_hosts", &c.api.allowed_hosts,
                  "host names the HTTP server answers to besides localhost and IP addresses ('*': any); others get 403"),
      number("api.max_connections", &c.api.max_connections, 1, 65536,
             "HTTP connections open at once, every client together (beyond: closed at once)"),
      number("api.max_connections_per_client", &c.api.max_connections_per_client, 1, 65536,
             "HTTP connections open at once from one address (beyond: closed at once)"),

      path("teach.datasets_dir", &c.teach.datasets_dir,
           "the datasets frames labelled in the page go to: DIR/MODEL/{train,val}/LABEL/*.jpg"),
      path("teach.models_dir", &c.teach.models_dir, "the models trained from the page: DIR/MODEL/candidate-*.safetensors"),
      text("teach.split", &c.teach.split, "the splits of a dataset and their shares, by blocks of stream time"),
      number("teach.block_s", &c.teach.block_s, 0.1, 86400.0, "seconds of stream time that go to one split together"),
      number("teach.epochs", &c.teach.epochs, 1, 1000, "a training job's most epochs (it stops early when val no longer improves)"),
      text("teach.python", &c.teach.python, "the tools' Python: a command or an absolute path (default: the environment scripts/tools-env.sh makes)"),
      path("teach.trainer", &c.teach.trainer, "tools/train.py (default: found beside the app)"),

      boolean("metrics.enabled", &c.metrics.enabled, "serve /metrics (Prometheus), /healthz and /readyz over HTTP"),
      text("metrics.address", &c.metrics.address, "address to listen on"),
      number("metrics.port", &c.metrics.port, 1, 65535, "HTTP port"),
      number("metrics.stall_s", &c.metrics.stall_s, 1.0, 86400.0,
             "/healthz fails when a running stream's last frame is older than this"),
  };
  for (auto& f : rest) fields.push_back(std::move(f));
  return fields;
}

}  // namespace detail

const char* name(InputKind v) { return detail::name_of(v); }
const char* name(DropPolicy v) { return detail::name_of(v); }
const char* name(Decoder v) { return detail::name_of(v); }
const char* name(Live v) { return detail::name_of(v); }
const char* name(OnDamage v) { return detail::name_of(v); }
const char* name(OutputKind v) { return detail::name_of(v); }
const char* name(Codec v) { return detail::name_of(v); }
const char* name(Resize v) { return detail::name_of(v); }
const char* name(Device v) { return detail::name_of(v); }
const char* name(Precision v) { return detail::name_of(v); }
const char* name(Corner v) { return detail::name_of(v); }
const char* name(Headline v) { return detail::name_of(v); }

}  // namespace vc::config
