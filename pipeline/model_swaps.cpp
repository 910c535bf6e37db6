#include "pipeline/model_swaps.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"
#include "config/utc_time.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

constexpr size_t kHistory = 10;
// A tuned engine whose build failed is built once more, this long after: on an H100 the build failed ("no usable
// algorithm", a capture invalidated) while 150-250 NVDEC decoders were being made, and the run went on untuned.
constexpr int kTuneAttempts = 2;
constexpr std::chrono::seconds kTuneRetryPause{5};

}  // namespace

void check_rule_labels(const config::Config& config, const std::string& model, const std::vector<std::string>& before,
                       const std::vector<std::string>& after) {
  for (const auto& rule : config.events.rules) {
    for (const auto& label : rule.labels) {
      const bool had = std::find(before.begin(), before.end(), label) != before.end();
      if (had && std::find(after.begin(), after.end(), label) == after.end()) {
        throw ConfigError(fmt::format("model {}: rule {} watches label '{}', which the new weights do not have (their "
                                      "labels: {}); the running model goes on",
                                      model, rule.name, label, fmt::join(after, ", ")));
      }
    }
  }
}

ModelSwaps::ModelSwaps(const config::Config& config, std::vector<std::string> names, std::vector<ModelInfo> infos)
    : config_(config), names_(std::move(names)) {
  const auto started = utc_now(UtcForm::kSeconds);
  for (size_t m = 0; m < names_.size(); ++m) {
    Slot slot;
    slot.info = infos.at(m);
    slot.current = {slot.info.id, config::for_model(config_, names_[m]).model.weights, started};
    slots_.push_back(std::move(slot));
  }
}

ModelSwaps::~ModelSwaps() { finish_tuning(); }

void ModelSwaps::prepare_tuning(const std::vector<std::vector<std::unique_ptr<inference::Classifier>>>& engines) {
  tuners_.assign(names_.size(), std::vector<inference::Classifier::Tuner>(engines.size()));
  bool any = false;
  {
    std::lock_guard lock(mutex_);
    for (size_t lane = 0; lane < engines.size(); ++lane) {
      for (size_t m = 0; m < engines[lane].size() && m < names_.size(); ++m) {
        tuners_[m][lane] = engines[lane][m]->tuner();
        if (tuners_[m][lane]) slots_[m].tuned = false;
        any = any || tuners_[m][lane];
      }
    }
  }
  if (any) {
    tuning_ = std::thread([this] {
      name_this_thread("vc-tuning");
      tune();
    });
  }
}

void ModelSwaps::start_tuning(const std::vector<std::unique_ptr<EngineLane>>& lanes) {
  std::lock_guard lock(lanes_mutex_);
  for (const auto& l : lanes) lanes_.push_back(l.get());
  lanes_given_.notify_all();
}

void ModelSwaps::finish_tuning() {
  {
    std::lock_guard lock(lanes_mutex_);
    cancel_ = true;
    lanes_given_.notify_all();
  }
  if (tuning_.joinable()) tuning_.join();
}

void ModelSwaps::tune() {
  const auto log = vc::log::get("pipeline");
  std::lock_guard one(switching_);  // (a deploy meanwhile: 409)
  for (size_t m = 0; m < tuners_.size() && !cancel_; ++m) {
    const auto started = std::chrono::steady_clock::now();
    bool switched = false;
    for (int attempt = 1; attempt <= kTuneAttempts && !switched && !cancel_; ++attempt) {
      try {
        std::vector<std::unique_ptr<inference::Classifier>> engines;
        std::vector<size_t> of_lanes;
        for (size_t lane = 0; lane < tuners_[m].size() && !cancel_; ++lane) {
          if (!tuners_[m][lane]) continue;
          engines.push_back(tuners_[m][lane](cancel_));
          of_lanes.push_back(lane);
        }
        if (engines.empty()) break;  // (a model whose engines started tuned)
        tuners_[m].clear();          // (what they hold, a copy of the weights, goes)
        std::vector<EngineLane*> lanes;
        {
          std::unique_lock lock(lanes_mutex_);
          lanes_given_.wait(lock, [&] { return !lanes_.empty() || cancel_; });
          if (cancel_) return;
          for (const size_t lane : of_lanes) lanes.push_back(lanes_.at(lane));
        }
        ModelInfo info;
        {
          std::lock_guard lock(mutex_);
          info = slots_[m].info;
        }
        switch_lanes(m, std::move(engines), info, lanes, cancel_);  // (the untuned engines it returns go)
        switched = true;
      } catch (const std::exception& e) {
        if (cancel_) break;
        // Once more after a pause: a build beside many decoders starting has failed, and one after them did not.
        const bool again = attempt < kTuneAttempts && !tuners_[m].empty();
        log->warn("model {}: the tuned engine could not be built ({}): the untuned one goes on{}", names_[m], e.what(),
                  again ? fmt::format("; trying again in {} s", kTuneRetryPause.count()) : "");
        if (!again) break;
        std::unique_lock lock(lanes_mutex_);
        lanes_given_.wait_for(lock, kTuneRetryPause, [&] { return cancel_.load(); });
      }
    }
    if (!switched) continue;
    std::lock_guard lock(mutex_);
    auto& slot = slots_[m];
    slot.tuned = true;
    slot.tuned_after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - created_).count();
    log->info("model {}: the tuned engine now classifies every stream (built beside the untuned one and switched in "
              "{:.2f} s, {:.2f} s after the run was set up)",
              names_[m], std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
              slot.tuned_after_s);
  }
}

size_t ModelSwaps::find(const std::string& name) const {
  const auto at = std::find(names_.begin(), names_.end(), name);
  if (at == names_.end()) {
    throw RequestError(404, fmt::format("no model is named '{}' in this run (its models: {})", name, fmt::join(names_, ", ")));
  }
  return size_t(at - names_.begin());
}

ModelView ModelSwaps::view(const Slot& slot) const {
  return {slot.info.name, slot.current, slot.info.labels, slot.history, !slot.previous.empty(), slot.tuned,
          slot.tuned_after_s};
}

std::vector<ModelView> ModelSwaps::views() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelView> out;
  for (const auto& s : slots_) out.push_back(view(s));
  return out;
}

std::string ModelSwaps::weights(const std::string& name) const {
  const auto at = std::find(names_.begin(), names_.end(), name);
  if (at == names_.end()) return "";
  std::lock_guard lock(mutex_);
  return slots_[size_t(at - names_.begin())].current.weights;
}

std::vector<std::unique_ptr<inference::Classifier>> ModelSwaps::switch_lanes(
    size_t m, std::vector<std::unique_ptr<inference::Classifier>> engines, const ModelInfo& info,
    const std::vector<EngineLane*>& lanes, const std::atomic<bool>& stopping) {
  struct Waiting {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::unique_ptr<inference::Classifier>> old;
    size_t switched = 0;
  };
  auto waiting = std::make_shared<Waiting>();
  waiting->old.resize(lanes.size());
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    lanes[lane]->swap(int(m), std::move(engines[lane]), info, [waiting, lane](std::unique_ptr<inference::Classifier> old) {
      std::lock_guard lock(waiting->mutex);
      waiting->old[lane] = std::move(old);
      ++waiting->switched;
      waiting->cv.notify_all();
    });
  }
  std::unique_lock lock(waiting->mutex);
  while (!waiting->cv.wait_for(lock, 100ms, [&] { return waiting->switched == lanes.size(); })) {
    // A lane that has ended (the run stops) switches no more: what it was given goes with it.
    if (stopping) throw RequestError(503, "the run is stopping");
  }
  return std::move(waiting->old);
}

ModelView ModelSwaps::deploy(const std::string& name, const std::string& weights, const std::string& read_from,
                             const std::vector<EngineLane*>& lanes, const std::atomic<bool>& stopping) {
  const size_t m = find(name);
  std::unique_lock one(switching_, std::try_to_lock);
  if (!one.owns_lock()) throw RequestError(409, "a model is being deployed, rolled back or tuned: try again when it is done");
  const auto log = vc::log::get("pipeline");
  ModelInfo before;
  {
    std::lock_guard lock(mutex_);
    before = slots_[m].info;
  }
  const auto id = model_id(name, read_from);
  if (id == before.id) {
    log->info("model {}: {} is the running model's weights ({}): nothing to deploy", name, weights, id);
    std::lock_guard lock(mutex_);
    return view(slots_[m]);
  }
  auto cfg = config::for_model(config_, name);
  cfg.model.weights = read_from;
  cfg.inference.tune_in_background = false;  // (built beside the running one: it switches in tuned)
  const auto started = std::chrono::steady_clock::now();
  log->info("model {}: building {} ({}) beside the running {}", name, weights, id, before.id);
  std::vector<std::unique_ptr<inference::Classifier>> engines;
  try {
    engines = inference::Classifier::create_all(cfg);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("model {}: {}: {} (the running model goes on)", name, weights, e.what()));
  }
  if (engines.size() != lanes.size()) {
    throw InternalError(fmt::format("model {}: {} engines built for {} lanes", name, engines.size(), lanes.size()));
  }
  const auto& c = *engines.front();
  ModelInfo info{name, id, c.labels(), c.num_classes(), c.settings().model.top_k};
  check_rule_labels(config_, name, before.labels, info.labels);
  auto old = switch_lanes(m, std::move(engines), info, lanes, stopping);
  ModelView out;
  std::vector<std::unique_ptr<inference::Classifier>> dropped;  // the generation before: let go of outside the lock
  {
    std::lock_guard lock(mutex_);
    auto& slot = slots_[m];
    dropped = std::exchange(slot.previous, std::move(old));
    slot.previous_info = std::exchange(slot.info, info);
    slot.history.insert(slot.history.begin(), slot.current);
    if (slot.history.size() > kHistory) slot.history.resize(kHistory);
    slot.current = {id, weights, utc_now(UtcForm::kSeconds)};
    out = view(slot);
  }
  log->info("model {}: {} now classifies every stream ({} before; built and switched in {:.2f} s)", name, id, before.id,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return out;
}

ModelView ModelSwaps::roll_back(const std::string& name, const std::vector<EngineLane*>& lanes,
                                const std::atomic<bool>& stopping) {
  const size_t m = find(name);
  std::unique_lock one(switching_, std::try_to_lock);
  if (!one.owns_lock()) throw RequestError(409, "a model is being deployed, rolled back or tuned: try again when it is done");
  std::vector<std::unique_ptr<inference::Classifier>> engines;
  ModelInfo info;
  {
    std::lock_guard lock(mutex_);
    auto& slot = slots_[m];
    if (slot.previous.empty()) {
      throw RequestError(409, fmt::format("model {} has no earlier weights to roll back to", name));
    }
    engines = std::move(slot.previous);
    slot.previous.clear();
    info = slot.previous_info;
  }
  auto old = switch_lanes(m, std::move(engines), info, lanes, stopping);
  ModelView out;
  ModelVersion was;
  {
    std::lock_guard lock(mutex_);
    auto& slot = slots_[m];
    slot.previous = std::move(old);
    slot.previous_info = std::exchange(slot.info, info);
    was = slot.current;
    ModelVersion back = slot.history.front();
    slot.history.front() = slot.current;  // (the one rolled back from is the one to go back to now)
    back.deployed = utc_now(UtcForm::kSeconds);
    slot.current = back;
    out = view(slot);
  }
  vc::log::get("pipeline")->info("model {}: rolled back to {} (from {})", name, out.current.id, was.id);
  return out;
}

}  // namespace vc::pipeline
