// What each stream classifies: its whole picture, its regions (each by its model, every Nth frame), or both. The run's
// models are numbered by their place in config::models_in_use; a stream's plan names them by that number. Plans are
// read by the engine lanes for every batch and replaced whole (a stream added, its regions changed over the API):
// a batch uses the plan it read, the next one the new plan.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "inference/preprocess.hpp"

namespace vc::pipeline {

struct RegionPlan {
  struct Item {
    config::Region region;
    int model = 0;  // index in the run's models
  };
  bool whole = true;        // the whole picture, by the default model
  std::vector<Item> regions;
};

// One thing a batch classifies: a frame's whole picture or one of its regions.
struct WorkItem {
  int frame = 0;          // index in the batch's frames
  int region = -1;        // index in the plan's regions; -1 = the whole picture
  int model = 0;
  inference::CropBox box; // empty for the whole picture
  std::string name;       // the region's name ("" = whole)
};

class RegionTable {
 public:
  // `models`: the run's models, by name (config::models_in_use); `capacity`: stream slots.
  RegionTable(std::vector<std::string> models, size_t capacity);

  // The stream's plan from its configuration. Throws vc::ConfigError for a region whose model the run did not load
  // (plan() says so without setting anything).
  [[nodiscard]] std::shared_ptr<const RegionPlan> plan(const config::Input& input) const;
  void set(int stream, const config::Input& input);
  // Whether `input`'s regions may replace a running stream's: checked as a configuration's are, inside its picture
  // (`width` x `height`; 0: not known yet, its source checks them at its first frame), their models loaded. Throws
  // vc::ConfigError.
  void check(const config::Config& config, const config::Input& input, int width, int height) const;
  [[nodiscard]] std::shared_ptr<const RegionPlan> get(int stream) const;
  [[nodiscard]] const std::vector<std::string>& models() const { return models_; }
  // The model's number, or -1.
  [[nodiscard]] int model_index(const std::string& name) const;
  // The most items one frame of any stream may give `model`: how many frames a batch may take so that no model's
  // part of it is larger than its engine's batch.
  [[nodiscard]] int most_items_per_frame(int model) const;

  // The items of a frame shown `width` x `height`, number `index` of its stream, under `plan`. A region whose box
  // is not inside this picture (a source that changed size) is left out and named in `outside`.
  static void items_of(const RegionPlan& plan, int frame, int64_t index, int width, int height, std::vector<WorkItem>& out,
                       std::vector<std::string>* outside = nullptr);

 private:
  void count(const RegionPlan& plan, int sign);  // mutex held

  std::vector<std::string> models_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const RegionPlan>> plans_;
  std::vector<std::map<int, int>> per_frame_;  // per model: how many plans give a frame N items of it (N > 0)
};

}  // namespace vc::pipeline
