// The configuration's schema, private to config/: one table binds every key path to its field, type, range and
// description (schema.cpp). Parsing, overrides, documentation and YAML output (config.cpp) all walk that table, so
// a key is declared exactly once.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.hpp"

namespace vc::config::detail {

// The context a value is set in: where it came from (for errors) and the directory relative paths resolve in.
struct SetContext {
  std::string at;
  std::string base_dir;
  std::string origin;  // the file (or "--set …") the value came from: for the places of nested values
};

struct Field {
  std::string path;
  std::string description;
  std::function<void(const YAML::Node& node, const SetContext& ctx)> set;
  std::function<YAML::Node()> get;
  bool is_text = false;  // a --set value is taken as text, not parsed as YAML
};

// The keys of one stream, under `prefix` ("input" or "inputs.N"), bound to `input`'s fields.
std::vector<Field> input_schema(Input& input, const std::string& prefix);
// The keys of one model section under `prefix` ("model" or "models.NAME"), bound to `model`'s fields.
std::vector<Field> model_fields(Model& model, const std::string& prefix);
// Every other key, bound to `config`'s fields (the models of `models:` included).
std::vector<Field> schema(Config& config);

// Where a value came from, for error messages: "file.yaml:3:7" or "--set a.b=c".
std::string where(const std::string& origin, const YAML::Node& node, bool has_marks);
[[noreturn]] void reject(const std::string& at, const std::string& path, const std::string& why);
// "a mapping", "a list", "'text'": what a node is, for error messages.
std::string describe(const YAML::Node& node);
// `text` itself, or a configuration error when it is not valid UTF-8 or holds a control character (but tab and
// newline): nothing the app is configured with needs one, and such text would not read back as written (yaml-cpp
// writes a value ending in a carriage return plain, and invalid UTF-8 as other characters).
std::string plain_text(std::string text, const std::string& at, const std::string& path);
// A mapping key as text; keys that are lists or mappings are a configuration error, not a crash.
std::string key_text(const YAML::Node& key, const std::string& at, const std::string& parent);
// " (did you mean top_k?)" when a known name is close to `wrong`, else "".
std::string did_you_mean(const std::string& wrong, const std::vector<std::string>& known);

}  // namespace vc::config::detail
