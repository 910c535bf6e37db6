#include "inference/model/model_card.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/errors.hpp"

namespace vc::inference {
namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& key, const std::string& value, const char* want) {
  throw DataError(fmt::format("{}: metadata '{}' is '{}', expected {}", origin, key,
                              value.size() > 80 ? value.substr(0, 80) + "…" : value, want));
}

double to_number(const std::string& origin, const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used != value.size() || !std::isfinite(v)) throw std::invalid_argument("trailing text");
    return v;
  } catch (const std::exception&) {
    bad(origin, key, value, "a number");
  }
}

std::array<double, 3> to_triple(const std::string& origin, const std::string& key, const std::string& value) {
  const auto j = nlohmann::json::parse(value, nullptr, false);
  if (!j.is_array() || j.size() != 3) bad(origin, key, value, "a JSON list of 3 numbers");
  std::array<double, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    if (!j[i].is_number() || !std::isfinite(j[i].get<double>())) bad(origin, key, value, "a JSON list of 3 numbers");
    out[i] = j[i].get<double>();
  }
  return out;
}

}  // namespace

ModelCard read_model_card(const std::map<std::string, std::string>& m, const std::string& origin) {
  ModelCard card;
  if (auto it = m.find("input_size"); it != m.end()) {
    const double v = to_number(origin, it->first, it->second);
    if (v != std::floor(v) || v < 16 || v > 1024) bad(origin, it->first, it->second, "an integer in [16, 1024]");
    card.input_size = int(v);
  }
  if (auto it = m.find("resize"); it != m.end()) {
    if (it->second != "crop" && it->second != "letterbox" && it->second != "stretch") {
      bad(origin, it->first, it->second, "crop, letterbox or stretch");
    }
    card.resize = it->second;
  }
  if (auto it = m.find("crop_ratio"); it != m.end()) {
    const double v = to_number(origin, it->first, it->second);
    if (v < 0.1 || v > 1.0) bad(origin, it->first, it->second, "a number in [0.1, 1]");
    card.crop_ratio = v;
  }
  if (auto it = m.find("mean"); it != m.end()) card.mean = to_triple(origin, it->first, it->second);
  if (auto it = m.find("std"); it != m.end()) {
    card.std = to_triple(origin, it->first, it->second);
    for (double v : *card.std) {
      if (!(v > 0)) bad(origin, it->first, it->second, "positive standard deviations");
    }
  }
  if (auto it = m.find("labels"); it != m.end()) {
    const auto j = nlohmann::json::parse(it->second, nullptr, false);
    if (!j.is_array() || j.empty()) bad(origin, it->first, it->second, "a JSON list of class names");
    for (const auto& l : j) {
      if (!l.is_string() || l.get<std::string>().empty()) bad(origin, it->first, it->second, "a JSON list of class names");
      card.labels.push_back(l.get<std::string>());
    }
  }
  if (auto it = m.find("architecture"); it != m.end()) card.architecture = it->second;
  return card;
}

std::map<std::string, std::string> model_card_metadata(const ModelCard& c) {
  std::map<std::string, std::string> m;
  if (c.input_size) m["input_size"] = std::to_string(*c.input_size);
  if (c.resize) m["resize"] = *c.resize;
  if (c.crop_ratio) m["crop_ratio"] = fmt::format("{}", *c.crop_ratio);
  if (c.mean) m["mean"] = nlohmann::json(*c.mean).dump();
  if (c.std) m["std"] = nlohmann::json(*c.std).dump();
  if (!c.labels.empty()) m["labels"] = nlohmann::json(c.labels).dump();
  if (c.architecture) m["architecture"] = *c.architecture;
  return m;
}

}  // namespace vc::inference
