#include "service/api_views.hpp"

#include <strings.h>

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "config/redact.hpp"

namespace vc::service {

namespace fs = std::filesystem;
using json = nlohmann::json;
using http::Response;
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

// A measurement as a person reads it (fps to the hundredth, milliseconds to the microsecond), not 15 digits.
double rounded(double v, double per_unit) { return std::round(v * per_unit) / per_unit; }

json stream_view(const StreamStats& s, const pipeline::RunControl& run) {
  const auto label = s.label();
  // The frame count first: a stream is running before its first frame is queued, so a view that counts frames never
  // says "starting" (read the other way round, a first result landing between the two reads did).
  const int64_t frames = s.classified.load();
  json view{{"name", s.name},
            {"state", pipeline::name(s.state.load())},
            {"source", s.source},
            {"decoder", s.decoder_name()},
            {"live", s.live},
            {"gpu_frames", s.gpu_frames.load()},
            {"engine", s.engine.load()},
            {"gpu", s.gpu.load()},
            {"fps", rounded(s.rate.per_second(pipeline::Clock::now()), 100)},
            {"frames", frames},
            {"dropped", s.queue_dropped.load() + s.output_dropped.load()},
            {"restarts", s.reconnects.load()},
            {"latency_ms", {{"p50", rounded(s.latency.percentile_ms(0.5), 1000)},
                            {"p99", rounded(s.latency.percentile_ms(0.99), 1000)}}},
            {"label", label.index >= 0 ? json(label.label) : json(nullptr)},
            {"score", label.index >= 0 ? json(rounded(label.score, 1e6)) : json(nullptr)},
            {"events", s.events.load()}};
  // Its regions' latest results (their boxes: GET /api/v1/streams/NAME/regions).
  if (const auto regions = s.region_stats(); !regions.empty()) {
    json list = json::array();
    for (const auto& r : regions) {
      list.push_back({{"name", r.region}, {"model", r.model}, {"label", r.current.label},
                      {"score", rounded(r.current.score, 1e6)}, {"results", r.classified}});
    }
    view["regions"] = list;
  }
  if (s.shown_width > 0) view["size"] = {s.shown_width.load(), s.shown_height.load()};
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

// A JSON answer; any credential a URI in it carries is replaced (config/redact.hpp): nothing the API says has one.
Response reply(int status, const json& body) {
  return {status, config::redact_credentials(body.dump(-1, ' ', false, json::error_handler_t::replace))};
}

Response error_reply(int status, const std::string& message, const std::string& key) {
  json body{{"error", message}};
  if (!key.empty()) body["key"] = key;
  return reply(status, body);
}

std::string json_error_text(const json::parse_error& e) {
  const std::string what = e.what();
  const auto at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

json model_view(const pipeline::ModelView& m) {
  const auto version = [](const pipeline::ModelVersion& v) {
    return json{{"id", v.id}, {"weights", v.weights}, {"deployed", v.deployed}};
  };
  json history = json::array();
  for (const auto& v : m.history) history.push_back(version(v));
  return {{"name", m.name},          {"id", m.current.id}, {"weights", m.current.weights},
          {"deployed", m.current.deployed}, {"labels", m.labels}, {"history", history},
          {"can_roll_back", m.can_roll_back}, {"tuned", m.tuned}, {"tuned_after_s", m.tuned_after_s}};
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

std::string text_of(const nlohmann::json& line, const char* key, const std::string& otherwise) {
  const auto it = line.find(key);
  return it != line.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

double number_of(const nlohmann::json& line, const char* key, double otherwise) {
  const auto it = line.find(key);
  return it != line.end() && it->is_number() && std::isfinite(it->get<double>()) ? it->get<double>() : otherwise;
}

}  // namespace vc::service
