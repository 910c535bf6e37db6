#include "pipeline/regions/run_models.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include <glib.h>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::pipeline {

std::string model_id(const std::string& name, const std::string& path) {
  if (path.empty()) return name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NoInputError(fmt::format("cannot read the weights {}: {}", path, std::strerror(errno)));
  const std::unique_ptr<GChecksum, decltype(&g_checksum_free)> sum(g_checksum_new(G_CHECKSUM_SHA256), g_checksum_free);
  std::vector<char> chunk(size_t(1) << 20);
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    if (in.gcount() > 0) g_checksum_update(sum.get(), reinterpret_cast<const guchar*>(chunk.data()), gssize(in.gcount()));
  }
  if (in.bad()) throw NoInputError(fmt::format("reading the weights {} failed", path));
  return fmt::format("{}@{}", name, std::string(g_checksum_get_string(sum.get())).substr(0, 12));
}

RunModels load_models(const config::Config& cfg, std::vector<std::unique_ptr<inference::Classifier>> default_engines) {
  RunModels run;
  const bool engines_given = !default_engines.empty();  // (a test's, whose model.weights may name no file)
  run.names = config::models_in_use(cfg);
  if (!default_engines.empty() && run.names.front() != "default") run.names.insert(run.names.begin(), "default");
  std::vector<std::vector<std::unique_ptr<inference::Classifier>>> by_model;  // model -> lane
  for (const auto& name : run.names) {
    if (name == "default" && !default_engines.empty()) {
      by_model.push_back(std::move(default_engines));
    } else {
      try {
        by_model.push_back(inference::Classifier::create_all(config::for_model(cfg, name)));
      } catch (const Error& e) {
        if (name == "default") throw;
        throw Error(e.code(), fmt::format("model {}: {}", name, e.what()));
      }
    }
    if (by_model.back().size() != by_model.front().size()) {
      throw InternalError(fmt::format("model {}: {} engines, the first model {}", name, by_model.back().size(),
                                      by_model.front().size()));
    }
    const auto& c = *by_model.back().front();
    const auto weights = inference::weights_file(config::for_model(cfg, name));  // (the bundled model's too)
    std::error_code missing;
    const bool unknown = name == "default" && engines_given && !std::filesystem::is_regular_file(weights, missing);
    run.infos.push_back({name, model_id(name, unknown ? "" : weights), c.labels(), c.num_classes(),
                         c.settings().model.top_k});
    if (run.names.size() > 1) {
      vc::log::get("pipeline")->info("model {}: {} ({} classes, input {}x{})", name, c.architecture(), c.num_classes(),
                                     c.preprocess_params().size, c.preprocess_params().size);
    }
  }
  for (size_t lane = 0; lane < by_model.front().size(); ++lane) {
    std::vector<std::unique_ptr<inference::Classifier>> models;
    for (auto& m : by_model) models.push_back(std::move(m[lane]));
    run.lanes.push_back(std::move(models));
  }
  return run;
}

std::map<std::string, std::vector<std::string>> region_labels(const config::Config& cfg, const RunModels& models) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& in : cfg.inputs) {
    for (const auto& r : in.regions) {
      const auto at = std::find(models.names.begin(), models.names.end(), r.model);
      if (at == models.names.end()) continue;
      auto& all = out[r.name];
      for (const auto& l : models.infos[size_t(at - models.names.begin())].labels) {
        if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
      }
    }
  }
  return out;
}

}  // namespace vc::pipeline
