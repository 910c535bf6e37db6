// Cross-key validation and the command line's --input/--output shorthands.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::config {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return s;
}

bool ends_with_any(const std::string& s, std::initializer_list<const char*> suffixes) {
  const auto l = lower(s);
  return std::any_of(suffixes.begin(), suffixes.end(), [&](const char* suf) {
    const std::string x(suf);
    return l.size() >= x.size() && l.compare(l.size() - x.size(), x.size(), x) == 0;
  });
}

constexpr int kMinFrameSide = 16;  // below this no encoder or model input makes sense


// Names the app gives files of its own beside the streams' folders and files (events.dir, output.collect.dir).
bool reserved_stream_name(std::string n) {
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const auto ends = [&](const std::string& tail) { return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0; };
  return n == "index.jsonl" || n == "events.jsonl" || n == "collect.jsonl" || ends(".tmp") || ends(".partial");
}

void validate_input(const Input& in, const std::string& key) {
  auto need = [&](bool ok, const char* field, const char* when) {
    if (!ok) throw ConfigError(fmt::format("{}.{}: required when {}.kind is {}", key, field, key, when));
  };
  need(in.kind != InputKind::File || !in.path.empty(), "path", "file");
  need(in.kind != InputKind::Image || !in.path.empty(), "path", "image");
  need(in.kind != InputKind::Uri || !in.uri.empty(), "uri", "uri");
  need(in.kind != InputKind::Webcam || !in.device.empty(), "device", "webcam");
  if ((in.width == 0) != (in.height == 0)) throw ConfigError(fmt::format("{}.width, {}.height: give both or neither", key, key));
  for (const auto& [field, v] : {std::pair{"width", in.width}, std::pair{"height", in.height}}) {
    if (v != 0 && v < kMinFrameSide) {
      throw ConfigError(fmt::format("{}.{}: {} is too small: frames must be at least {}x{} pixels", key, field, v,
                                    kMinFrameSide, kMinFrameSide));
    }
  }
  if (in.reconnect.max_delay_s < in.reconnect.delay_s) {
    throw ConfigError(fmt::format("{}.reconnect.max_delay_s: {} is less than reconnect.delay_s ({})", key,
                                  in.reconnect.max_delay_s, in.reconnect.delay_s));
  }
}

// "rtsp://HOST[:PORT][/PATH]" -> the output's address, port and mount point.
void set_rtsp(Config& c, const std::string& spec) {
  static const std::regex url(R"(rtsp://([^/:]+)(?::([0-9]+))?(/.*)?)");
  std::smatch m;
  if (!std::regex_match(spec, m, url)) throw UsageError(fmt::format("--output: '{}' is not rtsp://HOST[:PORT]/PATH", spec));
  c.output.kind = OutputKind::Rtsp;
  c.output.rtsp_address = m[1].str();
  if (m[2].matched) {
    const auto digits = m[2].str();
    int port = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535) {
      throw UsageError(fmt::format("--output: port {} is out of range [1, 65535]", digits));
    }
    c.output.rtsp_port = port;
  }
  if (m[3].matched && m[3].length() > 1) c.output.rtsp_path = m[3].str();
}

}  // namespace

size_t invalid_utf8_at(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return i;
      const auto b = static_cast<unsigned char>(text[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}


bool valid_stream_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 && n.find_first_not_of('.') != std::string::npos &&
         std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
}

void validate_stream(const Input& in, const std::string& key) {
  validate_input(in, key);
  if (in.name.empty()) throw ConfigError(fmt::format("{}.name: required (it names the stream's files, topics and URLs)", key), key + ".name");
  if (!valid_stream_name(in.name)) {
    throw ConfigError(fmt::format("{}.name: '{}' must be 1-64 letters, digits, '_', '-' or '.' (not only dots): it "
                                  "names files, topics and URLs", key, in.name), key + ".name");
  }
  if (reserved_stream_name(in.name)) {
    throw ConfigError(fmt::format("{}.name: '{}' is a name the app uses for its own files (index.jsonl, events.jsonl, "
                                  "collect.jsonl, *.tmp, *.partial): choose another", key, in.name), key + ".name");
  }
}

void validate(Config& c) {
  if (c.inputs.empty() && !c.api.enabled) {
    throw ConfigError("inputs: at least one input is needed (or api.enabled: true, to add streams while it runs)");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    auto& in = c.inputs[i];
    const auto key = c.inputs.size() == 1 ? std::string("input") : fmt::format("inputs.{}", i);
    validate_input(in, key);
    if (in.name.empty()) in.name = fmt::format("stream{}", i);
    if (!valid_stream_name(in.name)) {
      throw ConfigError(fmt::format("{}.name: '{}' must be 1-64 letters, digits, '_', '-' or '.' (not only dots): it "
                                    "names files, topics and URLs", key, in.name));
    }
    if (!names.insert(in.name).second) throw ConfigError(fmt::format("{}.name: '{}' names two streams", key, in.name));
    validate_regions(c, in, key);
  }
  for (const auto& [name, model] : c.models) {
    if (!valid_stream_name(name) || name == "default") {
      throw ConfigError(fmt::format("models.{}: a model's name must be 1-64 letters, digits, '_', '-' or '.' (it names "
                                    "results and metrics), and not 'default' (that is model:)", name));
    }
  }
  validate_regions(c, c.input, "input");
  const auto& o = c.output;
  const bool several = c.inputs.size() > 1 || c.api.enabled;  // (streams may be added over the API)
  if (o.kind == OutputKind::File) {
    if (o.path.empty()) throw ConfigError("output.path: required when output.kind is file");
    if (!ends_with_any(o.path, {".mp4", ".mkv", ".mov"})) {
      throw ConfigError(fmt::format("output.path: '{}' must end in .mp4, .mkv or .mov (output.kind file)", o.path));
    }
    if (several && !o.tiled && o.path.find("{stream}") == std::string::npos) {
      throw ConfigError(fmt::format("output.path: {} cannot share '{}': put {{stream}} in the path (one file per "
                                    "stream) or set output.tiled: true (one mosaic)",
                                    c.api.enabled ? "streams added over the API" : fmt::format("{} streams", c.inputs.size()),
                                    o.path), "output.path");
    }
  }
  if (o.kind == OutputKind::Images && o.path.empty()) throw ConfigError("output.path: required when output.kind is images");
  if (o.kind == OutputKind::Images && o.tiled) throw ConfigError("output.tiled: not available for image outputs");
  if (o.kind == OutputKind::Images && single_image_output(o.path)) {
    std::error_code ec;
    const bool one_image = c.inputs.size() == 1 && c.inputs[0].kind == InputKind::Image &&
                           std::filesystem::is_regular_file(c.inputs[0].path, ec);
    if (!one_image) {
      throw ConfigError(fmt::format("output.path: '{}' is one image file, for one image in: for several frames or "
                                    "images give a folder (DIR/) or a name with %s", o.path));
    }
  }
  if (o.kind == OutputKind::Rtsp) {
    if (o.rtsp_path.empty() || o.rtsp_path[0] != '/') {
      throw ConfigError(fmt::format("output.rtsp_path: '{}' must start with /", o.rtsp_path));
    }
    if (several && !o.tiled && o.rtsp_path.find("{stream}") == std::string::npos) {
      throw ConfigError("output.rtsp_path: several streams need {stream} in the mount point (one per stream) or "
                        "output.tiled: true (one mosaic)");
    }
  }
  if ((o.width == 0) != (o.height == 0)) throw ConfigError("output.width, output.height: give both or neither");
  if (o.width != 0 && (o.width < kMinFrameSide || o.height < kMinFrameSide)) {
    throw ConfigError(fmt::format("output.width, output.height: {}x{} is too small (at least {}x{})", o.width, o.height,
                                  kMinFrameSide, kMinFrameSide));
  }
  if (c.mqtt.enabled && c.mqtt.host.empty()) throw ConfigError("mqtt.host: required when mqtt.enabled is true");
  const auto& prefix = c.mqtt.topic_prefix;
  if (prefix.empty() || prefix.find_first_of("+#") != std::string::npos ||
      std::any_of(prefix.begin(), prefix.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; })) {
    throw ConfigError(fmt::format("mqtt.topic_prefix: '{}' is not a topic a message can be published to (empty, or "
                                  "holding a wildcard + or #, or a control character)", prefix));
  }
  if ((!c.mqtt.tls_cert_file.empty()) != (!c.mqtt.tls_key_file.empty())) {
    throw ConfigError("mqtt.tls_cert_file, mqtt.tls_key_file: give both or neither");
  }
  std::set<std::string> rules;
  for (size_t i = 0; i < c.events.rules.size(); ++i) {
    const auto& name = c.events.rules[i].name;
    if (!valid_stream_name(name)) {  // it names files and event ids as a stream's name does
      throw ConfigError(fmt::format("events.rules[{}].name: '{}' must be 1-64 letters, digits, '_', '-' or '.' (it "
                                    "names event files)", i, name));
    }
    if (!rules.insert(name).second) throw ConfigError(fmt::format("events.rules[{}].name: '{}' names two rules", i, name));
  }
  if (!c.events.rules.empty() && c.events.dir.empty()) throw ConfigError("events.dir: required when there are rules");
}

bool single_image_output(const std::string& path) {
  std::error_code ec;
  return !path.empty() && path.back() != '/' && path.find("%s") == std::string::npos &&
         ends_with_any(path, {".jpg", ".jpeg", ".png"}) && !std::filesystem::is_directory(path, ec);
}

void set_input(Input& in, const std::string& spec) {
  if (spec.empty()) throw UsageError("--input: empty (give a file, a device, a URI or test)");
  if (spec.rfind("/dev/video", 0) == 0) {
    in.kind = InputKind::Webcam;
    in.device = spec;
  } else if (spec.find("://") != std::string::npos) {
    in.kind = InputKind::Uri;
    in.uri = spec;
  } else if (spec == "test" || spec.rfind("test:", 0) == 0) {
    in.kind = InputKind::Test;
    if (spec.size() > 5) in.pattern = spec.substr(5);
  } else if (std::error_code ec; std::filesystem::is_directory(spec, ec) || ends_with_any(spec, {".jpg", ".jpeg", ".png", ".bmp"}) ||
             (spec.find_first_of("*?[") != std::string::npos && !std::filesystem::exists(spec, ec))) {
    in.kind = InputKind::Image;  // a folder, an image, or a glob (an existing file with such a name is that file)
    in.path = spec;
  } else {
    in.kind = InputKind::File;
    in.path = spec;
  }
}

void set_output(Config& c, const std::string& spec) {
  if (spec.empty()) throw UsageError("--output: empty (give FILE.mp4, DIR/, display, rtsp://HOST:PORT/PATH or none)");
  auto& o = c.output;
  if (spec == "none") {
    o.kind = OutputKind::None;
  } else if (spec == "display") {
    o.kind = OutputKind::Display;
  } else if (spec.rfind("rtsp://", 0) == 0) {
    set_rtsp(c, spec);
  } else if (spec.back() == '/' || std::filesystem::is_directory(spec) || spec.find("%s") != std::string::npos ||
             ends_with_any(spec, {".jpg", ".jpeg", ".png"})) {
    o.kind = OutputKind::Images;
    o.path = spec;
  } else if (ends_with_any(spec, {".mp4", ".mkv", ".mov"})) {
    o.kind = OutputKind::File;
    o.path = spec;
  } else {
    throw UsageError(fmt::format("--output: '{}' is not an output: give a video file (.mp4, .mkv, .mov), a directory "
                                 "ending in / for labelled images, display, rtsp://HOST:PORT/PATH or none", spec));
  }
  c.explicit_keys["output.kind"] = "--output";
  if (o.kind == OutputKind::File || o.kind == OutputKind::Images) c.explicit_keys["output.path"] = "--output";
}

}  // namespace vc::config
