// The run's models over time: the weights each has now, the ones it had, and the switch of every engine lane to new
// weights (a deploy: PUT /api/v1/models/NAME, SIGHUP) or back to the previous ones (a rollback). The new engines are
// built beside the running ones; each lane takes its new engine between two batches (EngineLane::swap), so no frame
// is dropped or classified twice and no stream restarts. One switch at a time; the replaced engines stay built for a
// rollback (one generation: the memory of one more engine per model).
// Engines that started untuned (inference.tune_in_background: cuDNN's choices that need no timing or compiling) are
// replaced the same way by their tuned selves, built on a thread of ModelSwaps' own from the moment the run is set up
// (beside its streams' start), one model after another, and switched in once the lanes run; a deploy or rollback
// meanwhile is refused (409), so the tuned engines are always of the weights running.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "inference/classifier.hpp"
#include "pipeline/core/control.hpp"
#include "pipeline/engine_lane.hpp"
#include "pipeline/regions/run_models.hpp"

namespace vc::pipeline {

class ModelSwaps {
 public:
  // `config`: the run's configuration as given (a deploy builds from its model keys); `names`, `infos`: the run's
  // models as load_models made them.
  ModelSwaps(const config::Config& config, std::vector<std::string> names, std::vector<ModelInfo> infos);
  ~ModelSwaps();

  [[nodiscard]] std::vector<ModelView> views() const;

  // RunControl::deploy_model and roll_back_model, on `lanes` (every lane of the run, none failed). `read_from`: the
  // path the weights are read through (the checked file's /proc/self/fd path, or `weights` itself). `stopping`: the
  // run is ending (a lane that ends before it switches: 503).
  ModelView deploy(const std::string& name, const std::string& weights, const std::string& read_from,
                   const std::vector<EngineLane*>& lanes, const std::atomic<bool>& stopping);
  ModelView roll_back(const std::string& name, const std::vector<EngineLane*>& lanes, const std::atomic<bool>& stopping);

  // The weights configured for `name` now (what SIGHUP compares a fresh configuration with); "" for no such model.
  [[nodiscard]] std::string weights(const std::string& name) const;

  // Starts building the tuned selves of the untuned engines among `engines` (per lane, per model, before the lanes
  // take them; Classifier::tuner) on a thread of its own. Nothing to do when every engine is tuned.
  void prepare_tuning(const std::vector<std::vector<std::unique_ptr<inference::Classifier>>>& engines);
  // The run's lanes (in lane order) run: the tuned engines switch in as they are built. The lanes must outlive
  // finish_tuning().
  void start_tuning(const std::vector<std::unique_ptr<EngineLane>>& lanes);
  // The run ends: a build in progress gives up (within a layer), a switch not made is not made; joins that thread.
  void finish_tuning();

 private:
  struct Slot {
    ModelInfo info;
    ModelVersion current;
    std::vector<ModelVersion> history;                               // newest first
    std::vector<std::unique_ptr<inference::Classifier>> previous;   // per lane: history.front() still built
    ModelInfo previous_info;
    bool tuned = true;
    double tuned_after_s = 0;
  };
  size_t find(const std::string& name) const;
  ModelView view(const Slot& slot) const;
  void tune();
  // Every lane's engine of model `m` becomes `engines[lane]`; returns the engines they had, once all have switched.
  static std::vector<std::unique_ptr<inference::Classifier>> switch_lanes(
      size_t m, std::vector<std::unique_ptr<inference::Classifier>> engines, const ModelInfo& info,
      const std::vector<EngineLane*>& lanes, const std::atomic<bool>& stopping);

  const config::Config config_;
  std::vector<std::string> names_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  std::vector<std::vector<inference::Classifier::Tuner>> tuners_;  // per model, per lane (null: tuned already)
  std::mutex lanes_mutex_;
  std::condition_variable lanes_given_;
  std::vector<EngineLane*> lanes_;  // (once start_tuning gave them)
  std::atomic<bool> cancel_{false};
  std::thread tuning_;
  std::mutex switching_;     // one deploy or rollback at a time
  mutable std::mutex mutex_;  // slots_
  std::vector<Slot> slots_;
};

// A labels check for a deploy: every label a rule of `config` watches that `before` has must be one of `after`'s
// (else the rule could never fire again). Throws vc::ConfigError naming the rule, the label and the new labels.
void check_rule_labels(const config::Config& config, const std::string& model, const std::vector<std::string>& before,
                       const std::vector<std::string>& after);

}  // namespace vc::pipeline
