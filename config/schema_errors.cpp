// The schema's messages that say where a value came from and what was wrong with it (schema.hpp).
#include <algorithm>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/schema.hpp"

namespace vc::config::detail {

// Where a value came from, for error messages: "file.yaml:3:7" or "--set a.b=c".
std::string where(const std::string& origin, const YAML::Node& node, bool has_marks) {
  if (!has_marks || node.Mark().is_null()) return origin;
  return fmt::format("{}:{}:{}", origin, node.Mark().line + 1, node.Mark().column + 1);
}

[[noreturn]] void reject(const std::string& at, const std::string& path, const std::string& why) {
  throw ConfigError(fmt::format("{}: {}: {}", at, path, why), path);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing (null)";
    default: return fmt::format("'{}'", node.Scalar());
  }
}

std::string plain_text(std::string text, const std::string& at, const std::string& path) {
  if (const auto bad = invalid_utf8_at(text); bad != std::string::npos) {
    reject(at, path, fmt::format("the text is not valid UTF-8 (byte 0x{:02X} at position {})",
                                 int(static_cast<unsigned char>(text[bad])), bad + 1));
  }
  const auto bad = std::find_if(text.begin(), text.end(), [](unsigned char c) {
    return (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f;
  });
  if (bad != text.end()) {
    reject(at, path, fmt::format("a control character (U+{:04X}) at position {} of the text: not allowed in a value",
                                 int((unsigned char)*bad), bad - text.begin() + 1));
  }
  return text;
}

// A mapping key as text; keys that are lists or mappings are a configuration error, not a crash.
std::string key_text(const YAML::Node& key, const std::string& at, const std::string& parent) {
  const auto where_in = parent.empty() ? std::string("<top level>") : parent;
  if (!key.IsScalar()) reject(at, where_in, "a key must be a name, got " + describe(key));
  return plain_text(key.Scalar(), at, where_in);
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

}  // namespace vc::config::detail
