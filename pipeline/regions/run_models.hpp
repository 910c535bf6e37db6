// The run's models: every model its streams use (config::models_in_use: "default" first when the whole picture is
// classified), an engine of each on every GPU of inference.gpus, and what the stages after the engines need of each.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "inference/classifier.hpp"

namespace vc::pipeline {

// A model of the run as the stages after the engines see it.
struct ModelInfo {
  std::string name;                   // "default", or a name of models:
  std::string id;                     // model_id(name, its weights): what results lines carry as "model"
  std::vector<std::string> labels;
  int num_classes = 0;
  int top_k = 5;
};

struct RunModels {
  std::vector<std::string> names;   // the run's models, in the order the engines and RegionTable number them
  std::vector<ModelInfo> infos;     // by model
  std::vector<std::vector<std::unique_ptr<inference::Classifier>>> lanes;  // per lane (GPU), an engine per model
};

// "NAME@" and the first 12 hex digits of the SHA-256 of the weights file (`path`); the name alone when `path` is
// empty (an engine given by a test). Throws vc::NoInputError when the file cannot be read.
std::string model_id(const std::string& name, const std::string& path);

// Builds them. `default_engines`, when given, are the default model's (one per lane; tests give their own).
// Throws what Classifier::create_all throws, naming the model.
RunModels load_models(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> default_engines);

// The labels of the model of each region (by name) the configuration's streams have: what the rules that watch a
// region may name. A name used by regions of several models has all their labels.
std::map<std::string, std::vector<std::string>> region_labels(const config::Config& config, const RunModels& models);

}  // namespace vc::pipeline
