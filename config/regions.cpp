// Regions and models: a stream's regions checked against its picture and the models the configuration has, and the
// configuration as each model sees it.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config.hpp"
#include "config/errors.hpp"

namespace vc::config {

Config for_model(const Config& config, const std::string& name) {
  if (name == "default") return config;
  const auto it = config.models.find(name);
  if (it == config.models.end()) throw ConfigError(fmt::format("models.{}: no such model", name));
  Config copy = config;
  copy.model = it->second;
  // The keys set for this model, as "model.KEY": what its file's card may not override.
  for (auto k = copy.explicit_keys.begin(); k != copy.explicit_keys.end();) {
    k = k->first.rfind("model.", 0) == 0 ? copy.explicit_keys.erase(k) : std::next(k);
  }
  const auto prefix = "models." + name + ".";
  for (auto k = config.explicit_keys.lower_bound(prefix); k != config.explicit_keys.end() && k->first.rfind(prefix, 0) == 0; ++k) {
    copy.explicit_keys["model." + k->first.substr(prefix.size())] = k->second;
  }
  return copy;
}

std::vector<std::string> models_in_use(const Config& config) {
  std::vector<std::string> names;
  const auto use = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  // (a service's API may add a stream classified whole at any time)
  bool whole = config.api.enabled || config.inputs.empty();
  for (const auto& in : config.inputs) whole = whole || in.regions.empty() || in.whole;
  if (whole) use("default");
  for (const auto& in : config.inputs) {
    for (const auto& r : in.regions) use(r.model);
  }
  if (config.api.enabled) {
    for (const auto& [name, model] : config.models) use(name);  // (regions set over the API may name any)
  }
  if (names.empty()) use("default");
  return names;
}

std::optional<PixelBox> region_pixels(const Region& r, int width, int height) {
  PixelBox b;
  if (r.fractions()) {
    const int x0 = int(std::lround(r.box[0] * width)), y0 = int(std::lround(r.box[1] * height));
    const int x1 = int(std::lround((r.box[0] + r.box[2]) * width)), y1 = int(std::lround((r.box[1] + r.box[3]) * height));
    b = {x0, y0, x1 - x0, y1 - y0};
  } else {
    b = {int(std::lround(r.box[0])), int(std::lround(r.box[1])), int(std::lround(r.box[2])), int(std::lround(r.box[3]))};
  }
  if (b.x < 0 || b.y < 0 || b.width < 1 || b.height < 1 || b.x + b.width > width || b.y + b.height > height) return std::nullopt;
  return b;
}

std::string region_outside(const Region& r, int width, int height) {
  return fmt::format("region '{}': box [{}, {}, {}, {}]{} is not inside the {}x{} picture", r.name, r.box[0], r.box[1],
                     r.box[2], r.box[3], r.fractions() ? " (fractions)" : "", width, height);
}

std::optional<std::string> regions_outside(const std::vector<Region>& regions, int width, int height) {
  for (const auto& r : regions) {
    if (!region_pixels(r, width, height)) return region_outside(r, width, height);
  }
  return std::nullopt;
}

void validate_regions(const Config& config, const Input& in, const std::string& key) {
  std::vector<std::string> names;
  for (size_t i = 0; i < in.regions.size(); ++i) {
    const auto& r = in.regions[i];
    const auto at = fmt::format("{}.regions[{}]", key, i);
    if (!valid_stream_name(r.name)) {
      throw ConfigError(fmt::format("{}.name: '{}' must be 1-64 letters, digits, '_', '-' or '.' (it names results, "
                                    "topics and metrics)", at, r.name), at + ".name");
    }
    if (std::find(names.begin(), names.end(), r.name) != names.end()) {
      throw ConfigError(fmt::format("{}.name: '{}' names two regions of the stream", at, r.name), at + ".name");
    }
    names.push_back(r.name);
    if (r.model != "default" && !config.models.count(r.model)) {
      std::vector<std::string> known{"default"};
      for (const auto& [n, m] : config.models) known.push_back(n);
      throw ConfigError(fmt::format("{}.model: '{}' is not a model of models: (known: {})", at, r.model, fmt::join(known, ", ")),
                        at + ".model");
    }
    if (r.fractions()) {
      if (r.box[2] <= 0 || r.box[3] <= 0 || r.box[0] + r.box[2] > 1 + 1e-9 || r.box[1] + r.box[3] > 1 + 1e-9) {
        throw ConfigError(fmt::format("{}.box: [{}, {}, {}, {}] as fractions must lie within the picture (x + width "
                                      "and y + height at most 1)", at, r.box[0], r.box[1], r.box[2], r.box[3]), at + ".box");
      }
    } else if (r.box[2] < 1 || r.box[3] < 1) {
      throw ConfigError(fmt::format("{}.box: a box in pixels needs a width and height of at least 1", at), at + ".box");
    }
    if (in.width > 0 && in.height > 0 && !region_pixels(r, in.width, in.height)) {
      throw ConfigError(fmt::format("{}.box: {}", at, region_outside(r, in.width, in.height)), at + ".box");
    }
  }
}

}  // namespace vc::config
