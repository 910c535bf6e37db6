// What the REST API (api.hpp) says, as JSON and text: a stream's view, the configuration as JSON, the URLs of event
// files, and the small translations between requests and the config (the key a message names, a file:// URI's path).
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/config.hpp"
#include "config/errors.hpp"
#include "pipeline/core/control.hpp"
#include "service/http/http_message.hpp"

namespace vc::service {

// The key a config message names ("input.path: …" -> "input.path"), when the error carries none of its own.
std::string key_of(const ConfigError& e);
// A YAML document as JSON: numbers and booleans as such, quoted scalars as strings.
nlohmann::json yaml_to_json(const YAML::Node& node);
// A number rounded to 1/per_unit (JSON without float noise).
double rounded(double v, double per_unit);
// GET /api/v1/streams' entry for one stream.
nlohmann::json stream_view(const pipeline::StreamStats& s, const pipeline::RunControl& run);

// A JSON answer; any credential a URI in it carries is replaced (config/redact.hpp): nothing the API says has one.
http::Response reply(int status, const nlohmann::json& body);
// {"error": message, "key": key (when given)}.
http::Response error_reply(int status, const std::string& message, const std::string& key = {});
// A field of the expected type, else `otherwise`: a line of a file (collect.jsonl, a job's progress) that is
// hand-edited or foreign never throws.
std::string text_of(const nlohmann::json& line, const char* key, const std::string& otherwise);
double number_of(const nlohmann::json& line, const char* key, double otherwise);
// A JSON parser's message without its "[json.exception…] " prefix.
std::string json_error_text(const nlohmann::json::parse_error& e);

// A model as GET /api/v1/models and /api/v1/status show it.
nlohmann::json model_view(const pipeline::ModelView& m);
// The stream of that name the service shows: the latest one (a name removed and added again is the new stream), and
// none once it has been removed.
std::shared_ptr<const pipeline::StreamStats> find_stream(const pipeline::RunControl& run, const std::string& name);
// Percent-encoding for a URL path or a header ('/' kept).
std::string url_encoded(const std::string& text);
// The URL the service serves an event's file at (/api/v1/event-files/…), "" when it is not under `dir`.
std::string event_file_url(const std::filesystem::path& dir, const nlohmann::json& path);
const char* media_type(const std::filesystem::path& file);
// The key that says where a stream's frames come from (input.uri, input.path, …).
std::string source_key(const config::Input& in);
// file:///a%20b.mp4 -> /a b.mp4; "" when `uri` is not a file:// URI.
std::string file_uri_path(const std::string& uri);

}  // namespace vc::service
