#include "service/api_views.hpp"

#include <strings.h>

#include <regex>

#include <fmt/format.h>

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;
using pipeline::StreamState;
using pipeline::StreamStats;

std::string key_of(const ConfigError& e) {
  if (!e.key().empty()) return e.key();
  static const std::regex leading(R"(^([a-z_][a-z0-9_.]*(, [a-z_][a-z0-9_.]*)*): )");
  std::smatch m;
  const std::string what = e.what();
  if (std::regex_search(what, m, leading)) return m[1].str().substr(0, m[1].str().find(','));
  return {};
}

json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const auto text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted in the YAML: a string, whatever it looks like
      if (text == "true" || text == "false") return text == "true";
      long long i = 0;
      if (YAML::convert<long long>::decode(node, i)) return i;
      double d = 0;
      if (YAML::convert<double>::decode(node, d)) return d;
      return text;
    }
    default: return nullptr;
  }
}

json stream_view(const StreamStats& s, const pipeline::RunControl& run) {
  const auto label = s.label();
  json view{{"name", s.name},
            {"state", pipeline::name(s.state.load())},
            {"source", s.source},
            {"decoder", s.decoder_name()},
            {"live", s.live},
            {"gpu_frames", s.gpu_frames.load()},
            {"engine", s.engine.load()},
            {"gpu", s.gpu.load()},
            {"fps", s.rate.per_second(pipeline::Clock::now())},
            {"frames", s.classified.load()},
            {"dropped", s.queue_dropped.load() + s.output_dropped.load()},
            {"restarts", s.reconnects.load()},
            {"latency_ms", {{"p50", s.latency.percentile_ms(0.5)}, {"p99", s.latency.percentile_ms(0.99)}}},
            {"label", label.index >= 0 ? json(label.label) : json(nullptr)},
            {"score", label.index >= 0 ? json(label.score) : json(nullptr)},
            {"events", s.events.load()}};
  if (auto e = s.error_text(); !e.empty()) view["error"] = e;
  if (s.state == StreamState::Ended || s.state == StreamState::Failed) view["end_reason"] = s.end_reason_text();
  const auto last = run.last_event(s.name);
  view["last_event"] = last.seq ? json::parse(last.json, nullptr, false) : json(nullptr);
  return view;
}

// The stream of that name the service shows: the latest one (a name removed and added again is the new stream), and
// none once it has been removed.
std::shared_ptr<const StreamStats> find_stream(const pipeline::RunControl& run, const std::string& name) {
  std::shared_ptr<const StreamStats> found;
  for (auto& s : run.streams()) {
    if (s->name == name) found = s;
  }
  if (found && found->closed && found->end_reason_text() == "removed") return nullptr;
  return found;
}

std::string url_encoded(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/' || c == '~') out += char(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

// The URL the service serves an event's file at (/api/v1/event-files/…), "" when it is not under `dir`.
std::string event_file_url(const fs::path& dir, const json& path) {
  if (!path.is_string()) return {};
  std::error_code ec;
  const auto file = fs::weakly_canonical(fs::absolute(path.get<std::string>()), ec);
  if (ec) return {};
  const auto rel = file.lexically_relative(dir);
  if (rel.empty() || *rel.begin() == "..") return {};
  return "/api/v1/event-files/" + url_encoded(rel.generic_string());
}

const char* media_type(const fs::path& file) {
  const auto ext = file.extension().string();
  if (ext == ".jpg" || ext == ".jpeg") return "image/jpeg";
  if (ext == ".mp4") return "video/mp4";
  if (ext == ".mkv") return "video/x-matroska";
  if (ext == ".jsonl") return "application/x-ndjson";
  return "application/octet-stream";
}

// The key that says where a stream's frames come from.
std::string source_key(const config::Input& in) {
  switch (in.kind) {
    case config::InputKind::Webcam: return "input.device";
    case config::InputKind::Uri: return "input.uri";
    case config::InputKind::Test: return "input.pattern";
    default: return "input.path";
  }
}

// file:///a%20b.mp4 -> /a b.mp4; "" when `uri` is not a file:// URI.
std::string file_uri_path(const std::string& uri) {
  if (uri.size() < 7 || strncasecmp(uri.c_str(), "file://", 7) != 0) return {};
  std::string out;
  for (size_t i = 7; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() && std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      out += char(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += uri[i];
    }
  }
  return out.rfind("localhost/", 0) == 0 ? out.substr(9) : out;
}

}  // namespace vc::service
