// Parsing a configuration (YAML files, --set overrides), documenting it and writing it back, by walking the schema
// (schema.hpp).
#include "config/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
#include "config/logging.hpp"
#include "config/schema.hpp"

namespace vc::config {
namespace {

using namespace detail;
namespace fs = std::filesystem;

std::string section_of(const std::string& path) { return path.substr(0, path.find('.')); }

std::vector<std::string> section_names(const std::vector<Field>& fields) {
  std::vector<std::string> sections{"input", "inputs"};
  for (const auto& f : fields) {
    if (std::find(sections.begin(), sections.end(), section_of(f.path)) == sections.end()) {
      sections.push_back(section_of(f.path));
    }
  }
  if (std::find(sections.begin(), sections.end(), "models") == sections.end()) sections.push_back("models");
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
      field->set(kv.second, {where(origin, kv.second, true), base_dir, origin});
      config.explicit_keys[path] = origin;
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

// The explicit keys of stream N are recorded as "input.KEY" too: a key set on any stream counts as set. (Only the
// keys under the prefix are visited: with 10,000 streams a scan of every key per stream took seconds.)
void record_input_keys(Config& config, const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> added;
  const auto under = prefix + ".";
  for (auto it = config.explicit_keys.lower_bound(under); it != config.explicit_keys.end() && it->first.rfind(under, 0) == 0;
       ++it) {
    added.emplace_back("input." + it->first.substr(under.size()), it->second);
  }
  config.explicit_keys.insert(added.begin(), added.end());
}

// `models:` — a mapping of model names to model sections; its `default` entry is `model:`.
void apply_models(Config& config, const YAML::Node& map, const std::string& origin, const std::string& base_dir) {
  if (map.IsNull()) return;
  if (!map.IsMap()) reject(where(origin, map, true), "models", "expected a mapping of model names to model sections, got " + describe(map));
  for (const auto& kv : map) {
    const auto name = key_text(kv.first, where(origin, kv.first, true), "models");
    const auto prefix = name == "default" ? std::string("model") : "models." + name;
    Model& model = name == "default" ? config.model : config.models[name];
    auto fields = model_fields(model, prefix);
    if (kv.second.IsNull() || (kv.second.IsMap() && kv.second.size() == 0)) {
      config.explicit_keys[prefix + ".weights"] = origin;  // (a model named with nothing set: the bundled one)
    }
    apply_mapping(fields, prefix, kv.second, origin, base_dir, config);
  }
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
    } else if (name == "models") {
      apply_models(config, section.second, origin, base_dir);
      fields = schema(config);  // (bound to the models now there)
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
  // (an empty list is a service that starts with no stream: validate() allows it with api.enabled only)
  if (!inputs_node.IsSequence()) {
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
    for (auto& f : targets) f.set(value, {origin, "", origin});
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}: {}: invalid value: {}", origin, key, e.msg));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}: invalid value: {}", origin, key, e.what()));
  }
  config.explicit_keys[canonical] = "--set";
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

namespace {

std::string flow(const YAML::Node& node) {
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
}

// `fields` as YAML lines at `indent`, each with "# where it came from": the origin of `origin_prefix`.KEY, else of
// `fallback_prefix`.KEY (a stream's key set in `input:`), else "default". `dash`: the first line opens a list item.
void annotate(std::string& out, const std::vector<Field>& fields, size_t strip, int indent, const std::string& origin_prefix,
              const std::string& fallback_prefix, const std::map<std::string, std::string>& origins, bool dash) {
  std::string group;
  for (const auto& f : fields) {
    const std::string rest = f.path.substr(strip);
    const auto dot = rest.find('.');
    std::string key = rest;
    int at = indent;
    if (dot != std::string::npos) {
      if (rest.substr(0, dot) != group) {
        group = rest.substr(0, dot);
        out += std::string(size_t(indent - (dash ? 2 : 0)), ' ') + (dash ? "- " : "") + group + ":\n";
        dash = false;
      }
      key = rest.substr(dot + 1);
      at = indent + 2;
    } else {
      group.clear();
    }
    std::string origin = "default";
    if (auto it = origins.find(origin_prefix + "." + rest); it != origins.end()) {
      origin = it->second;
    } else if (auto fb = origins.find(fallback_prefix + "." + rest); !fallback_prefix.empty() && fb != origins.end()) {
      origin = fb->second;
    }
    out += std::string(size_t(at - (dash ? 2 : 0)), ' ') + (dash ? "- " : "") + key + ": " + flow(f.get()) + "  # " + origin + "\n";
    dash = false;
  }
}

}  // namespace

std::string to_yaml(const Config& config, const std::map<std::string, std::string>* origins) {
  Config copy = config;
  if (origins) {
    std::string out;
    if (copy.inputs.size() == 1) {
      out += "input:\n";
      annotate(out, input_schema(copy.inputs[0], "input"), 6, 2, "input", "inputs.0", *origins, false);
    } else {
      out += "inputs:\n";
      for (size_t i = 0; i < copy.inputs.size(); ++i) {
        annotate(out, input_schema(copy.inputs[i], "input"), 6, 4, fmt::format("inputs.{}", i), "input", *origins, true);
      }
    }
    std::string section;
    std::vector<Field> fields;
    const auto flush = [&] {
      if (fields.empty()) return;
      out += section + ":\n";
      annotate(out, fields, section.size() + 1, 2, section, "", *origins, false);
      fields.clear();
    };
    for (auto& f : schema(copy)) {
      if (section_of(f.path) != section) {
        flush();
        section = section_of(f.path);
      }
      fields.push_back(std::move(f));
    }
    flush();
    return out;
  }
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

namespace {

// A request's body (JSON or YAML text) as a mapping; `expected` says what it should have been.
YAML::Node body_mapping(const std::string& text, const std::string& origin, const char* expected) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: not JSON or YAML: {}", origin, e.msg));
  }
  if (!node.IsMap()) throw ConfigError(fmt::format("{}: expected {}, got {}", origin, expected, describe(node)));
  return node;
}

}  // namespace

Input with_regions(const Config& base, const Input& input, const std::string& text, const std::string& origin) {
  const auto node = body_mapping(text, origin, "{regions: [...], whole: …}");
  Config scratch = base;
  Input out = input;
  auto fields = input_schema(out, "input");
  std::erase_if(fields, [](const Field& f) { return f.path != "input.regions" && f.path != "input.whole"; });
  apply_mapping(fields, "input", node, origin, "", scratch);
  validate_regions(base, out, "input");
  return out;
}

Input parse_input(const Config& base, const std::string& text, const std::string& origin) {
  const auto node = body_mapping(text, origin, "a mapping of input keys");
  Config scratch = base;  // (the key bookkeeping goes here)
  Input in = base.input;
  in.name.clear();
  auto fields = input_schema(in, "input");
  apply_mapping(fields, "input", node, origin, "", scratch);
  validate_stream(in, "input");
  validate_regions(base, in, "input");
  return in;
}

std::string input_yaml(const Input& input, const Input& base) {
  // Its name, its kind and what differs from the defaults: what a person would have written.
  Input copy = input, defaults = base;
  const auto fields = input_schema(copy, "input");
  const auto default_fields = input_schema(defaults, "input");
  YAML::Node n(YAML::NodeType::Map);
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto key = fields[i].path.substr(6);
    const auto value = fields[i].get();
    if (key == "name" || key == "kind" || flow(value) != flow(default_fields[i].get())) put(n, key, value);
  }
  return flow(n);
}

void save_inputs(const std::vector<Input>& inputs, const std::string& path, const Input& base,
                 const std::vector<std::string>& added_over_api, const std::vector<DeployedModel>& deployed) {
  std::string text = "# The streams of a running video-classifier as changed over its API (api.state_file); written by it.\ninputs:\n";
  for (const auto& in : inputs) text += "  - " + input_yaml(in, base) + "\n";
  if (!added_over_api.empty()) {
    YAML::Emitter names;
    names << YAML::Flow << added_over_api;
    text += std::string("added_over_api: ") + names.c_str() + "\n";
  }
  if (!deployed.empty()) {
    text += "deployed_models:\n";
    for (const auto& d : deployed) {
      YAML::Emitter one;
      one << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << d.name << YAML::Key << "weights"
          << YAML::Value << d.weights << YAML::Key << "over" << YAML::Value << d.over << YAML::EndMap;
      text += std::string("  - ") + one.c_str() + "\n";
    }
  }
  const auto tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw IoError(fmt::format("{}: cannot write the streams file: {}", tmp, std::strerror(errno)));
  ::fchmod(fd, 0600);  // (a temporary file left by an older run may have had other permissions)
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const bool synced = done == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) throw IoError(fmt::format("{}: cannot write the streams file", tmp));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError(fmt::format("{}: cannot write the streams file: {}", path, ec.message()));
}

namespace {

YAML::Node load_streams_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw NoInputError(fmt::format("{}: cannot read the streams file", path));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}", path, e.msg));
  }
  const bool only_known = root.IsMap() && root["inputs"] &&
                          root.size() == 1u + (root["added_over_api"] ? 1u : 0u) + (root["deployed_models"] ? 1u : 0u);
  if (!only_known) {
    throw ConfigError(fmt::format("{}: a streams file holds `inputs:` and nothing else (but `added_over_api:` and "
                                  "`deployed_models:`)", path));
  }
  return root;
}

}  // namespace

void load_inputs(Config& config, const std::string& path) {
  YAML::Node root = load_streams_file(path);
  root.remove("added_over_api");
  const YAML::Node deployed = root["deployed_models"];
  root.remove("deployed_models");
  apply_document(config, root, path, "");
  for (size_t i = 0; i < config.inputs.size(); ++i) validate_stream(config.inputs[i], fmt::format("inputs.{}", i));
  if (!deployed) return;
  if (!deployed.IsSequence()) throw ConfigError(fmt::format("{}: deployed_models: a list of {{name, weights, over}}", path));
  for (const auto& d : deployed) {
    if (!d.IsMap() || !d["name"] || !d["weights"] || !d["over"] || !d["name"].IsScalar() || !d["weights"].IsScalar() ||
        !d["over"].IsScalar()) {
      throw ConfigError(fmt::format("{}: deployed_models: each entry is {{name, weights, over}}", path));
    }
    const auto name = d["name"].Scalar();
    Model* model = name == "default" ? &config.model : config.models.count(name) ? &config.models[name] : nullptr;
    const auto log = vc::log::get("config");
    if (!model) continue;  // (a model the config no longer has)
    if (model->weights != d["over"].Scalar()) {
      log->info("model {}: the config names other weights than when {} was deployed over the API: the config's are used",
                name, d["weights"].Scalar());
      continue;
    }
    std::error_code ec;
    if (!std::filesystem::is_regular_file(d["weights"].Scalar(), ec)) {
      log->warn("model {}: {} (deployed over the API) is gone: the config's weights are used", name, d["weights"].Scalar());
      continue;
    }
    log->info("model {}: {}, as deployed over the API (api.state_file)", name, d["weights"].Scalar());
    config.configured_weights[name] = model->weights;
    model->weights = d["weights"].Scalar();
  }
}

std::vector<std::string> load_added_over_api(const std::string& path) {
  const YAML::Node root = load_streams_file(path);
  std::vector<std::string> names;
  if (const auto list = root["added_over_api"]) {
    if (!list.IsSequence()) throw ConfigError(fmt::format("{}: added_over_api: a list of stream names", path));
    for (const auto& n : list) {
      if (!n.IsScalar()) throw ConfigError(fmt::format("{}: added_over_api: a list of stream names", path));
      names.push_back(n.Scalar());
    }
  }
  return names;
}

}  // namespace vc::config
