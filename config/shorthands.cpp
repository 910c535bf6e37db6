// Cross-key validation and the command line's --input/--output shorthands.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::config {
namespace {

bool ends_with_any(std::string s, std::initializer_list<const char*> suffixes) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return std::any_of(suffixes.begin(), suffixes.end(), [&](const char* suf) {
    const std::string x(suf);
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  });
}

}  // namespace

void validate(const Config& c) {
  auto need = [](bool ok, const std::string& key, const std::string& when) {
    if (!ok) throw ConfigError(fmt::format("{}: required when {}", key, when));
  };
  need(c.input.kind != "file" || !c.input.path.empty(), "input.path", "input.kind is file");
  need(c.input.kind != "image" || !c.input.path.empty(), "input.path", "input.kind is image");
  need(c.input.kind != "uri" || !c.input.uri.empty(), "input.uri", "input.kind is uri");
  need(c.input.kind != "webcam" || !c.input.device.empty(), "input.device", "input.kind is webcam");
  need(c.output.kind != "file" || !c.output.path.empty(), "output.path", "output.kind is file");
  need(!c.model.weights.empty(), "model.weights", "classifying (always)");
  if (c.output.kind == "file" && !ends_with_any(c.output.path, {".mp4", ".mkv", ".mov"})) {
    throw ConfigError(fmt::format("output.path: '{}' must end in .mp4, .mkv or .mov", c.output.path));
  }
  if (c.output.kind == "rtsp" && (c.output.rtsp_path.empty() || c.output.rtsp_path[0] != '/')) {
    throw ConfigError(fmt::format("output.rtsp_path: '{}' must start with /", c.output.rtsp_path));
  }
  if ((c.input.width == 0) != (c.input.height == 0)) {
    throw ConfigError("input.width, input.height: give both or neither");
  }
}

void set_input(Config& c, const std::string& spec) {
  if (spec.empty()) throw ConfigError("--input: empty");
  if (spec.rfind("/dev/video", 0) == 0) {
    c.input.kind = "webcam";
    c.input.device = spec;
  } else if (spec.find("://") != std::string::npos) {
    c.input.kind = "uri";
    c.input.uri = spec;
  } else if (spec == "test" || spec.rfind("test:", 0) == 0) {
    c.input.kind = "test";
    if (spec.size() > 5) c.input.pattern = spec.substr(5);
  } else if (spec.find_first_of("*?") != std::string::npos || std::filesystem::is_directory(spec) ||
             ends_with_any(spec, {".jpg", ".jpeg", ".png", ".bmp"})) {
    c.input.kind = "image";
    c.input.path = spec;
  } else {
    c.input.kind = "file";
    c.input.path = spec;
  }
}

void set_output(Config& c, const std::string& spec) {
  if (spec.empty()) throw ConfigError("--output: empty");
  if (spec == "none" || spec == "display") {
    c.output.kind = spec;
    return;
  }
  if (spec.rfind("rtsp://", 0) == 0) {
    static const std::regex url(R"(rtsp://([^/:]+)(?::(\d+))?(/.*)?)");
    std::smatch m;
    if (!std::regex_match(spec, m, url)) throw ConfigError(fmt::format("--output: '{}' is not rtsp://HOST[:PORT]/PATH", spec));
    c.output.kind = "rtsp";
    c.output.rtsp_address = m[1].str();
    if (m[2].matched) {
      const int port = std::stoi(m[2].str());
      if (port < 1 || port > 65535) throw ConfigError(fmt::format("--output: port {} is out of range", port));
      c.output.rtsp_port = port;
    }
    if (m[3].matched && m[3].length() > 1) c.output.rtsp_path = m[3].str();
    return;
  }
  c.output.kind = "file";
  c.output.path = spec;
}

}  // namespace vc::config
