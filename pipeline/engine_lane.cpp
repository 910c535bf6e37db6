#include "pipeline/engine_lane.hpp"

#include <algorithm>
#include <climits>
#include <utility>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

// With nothing in flight, how long the engine waits for a first frame before it looks again (the end of the run).
constexpr auto kIdleWait = 200ms;

}  // namespace

EngineLane::EngineLane(int index, std::vector<std::unique_ptr<inference::Classifier>> models, std::shared_ptr<FrameHub> hub,
                       PostStage& post, std::chrono::microseconds fill, std::shared_ptr<const RegionTable> regions,
                       std::vector<ModelInfo> infos)
    : index_(index), models_(std::move(models)), regions_(std::move(regions)), hub_(std::move(hub)), post_(post), fill_(fill) {
  if (models_.empty()) throw InternalError("EngineLane: no model");
  if (!infos.empty() && infos.size() != models_.size()) {
    throw InternalError(fmt::format("EngineLane: {} models, {} model infos", models_.size(), infos.size()));
  }
  if (!infos.empty()) infos_ = std::make_shared<const std::vector<ModelInfo>>(std::move(infos));
  cuda_device_ = models_.front()->cuda_device();
  engine_name_ = models_.front()->engine_name();
}

void EngineLane::interrupt() {
  std::lock_guard lock(models_mutex_);
  for (auto& m : models_) m->interrupt();
}

void EngineLane::swap(int model, std::unique_ptr<inference::Classifier> engine, ModelInfo info,
                      std::function<void(std::unique_ptr<inference::Classifier>)> done) {
  if (model < 0 || size_t(model) >= models_.size() || !engine) throw InternalError("EngineLane::swap: no such model");
  std::lock_guard lock(swaps_mutex_);
  swaps_.push_back({model, std::move(engine), std::move(info), std::move(done)});
  swap_waiting_ = true;
}

void EngineLane::take_swaps() {
  if (!swap_waiting_.load()) return;
  std::vector<Swap> swaps;
  {
    std::lock_guard lock(swaps_mutex_);
    swaps.swap(swaps_);
    swap_waiting_ = false;
  }
  if (swaps.empty()) return;
  while (!in_flight_.empty()) deliver();  // the batches of the engines being replaced come out first, as they ran
  for (auto& s : swaps) {
    std::unique_ptr<inference::Classifier> old;
    {
      std::lock_guard lock(models_mutex_);
      old = std::exchange(models_[size_t(s.model)], std::move(s.engine));
    }
    if (infos_) {
      auto infos = std::make_shared<std::vector<ModelInfo>>(*infos_);
      (*infos)[size_t(s.model)] = std::move(s.info);
      infos_ = std::move(infos);
    }
    s.done(std::move(old));
  }
}

EngineLane::~EngineLane() { join(); }

void EngineLane::start(Hooks hooks) {
  hooks_ = std::move(hooks);
  thread_ = std::thread([this] {
    name_this_thread("vc-engine");
    run();
  });
}

void EngineLane::join() {
  if (thread_.joinable()) thread_.join();
}

Failure EngineLane::failure_of(std::exception_ptr error) const {
  Failure why{ExitCode::kInternal, "unknown error"};
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    why = {e.code(), e.what()};
  } catch (const std::exception& e) {
    why.message = e.what();
  }
  const int gpu = cuda_device_;
  why.message = fmt::format("engine {}{} failed: {}", index_, gpu >= 0 ? fmt::format(" (GPU {})", gpu) : "", why.message);
  return why;
}

std::optional<Failure> EngineLane::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

void EngineLane::run() {
  try {
    drive();
  } catch (...) {
    const auto error = std::current_exception();
    const auto why = failure_of(error);
    {
      std::lock_guard lock(failure_mutex_);
      failure_ = why;
    }
    if (hooks_.failed(*this, error, why)) let_go();
  }
  hooks_.finished();
}

// As many frames as every model's batch holds, each frame giving a model at most its most items per frame.
size_t EngineLane::frames_per_batch() const {
  size_t frames = size_t(models_.front()->max_batch());
  if (!regions_) return frames;
  for (size_t m = 0; m < models_.size(); ++m) {
    const int per_frame = regions_->most_items_per_frame(int(m));
    if (per_frame > 0) frames = std::min(frames, size_t(std::max(1, models_[m]->max_batch() / per_frame)));
  }
  return std::max<size_t>(frames, 1);
}

// Whether every part of the oldest round has finished.
bool EngineLane::front_ready() const {
  const auto& parts = in_flight_.front().parts;
  return std::all_of(parts.begin(), parts.end(), [&](const InFlight::Part& p) {
    return p.collected || models_[size_t(p.model)]->ready();
  });
}

int EngineLane::pending(int model, const InFlight& round) const {
  int n = 0;
  const auto count = [&](const InFlight& r) {
    for (const auto& p : r.parts) n += p.model == model && !p.collected ? 1 : 0;
  };
  for (const auto& r : in_flight_) count(r);
  count(round);
  return n;
}

// Each model's items as batches of at most its engine's batch size. Before a batch goes to an engine that holds as many
// as it can, the oldest round is delivered — or, when only this round holds that engine's batches, its oldest is
// collected now and kept for the round's delivery.
void EngineLane::submit_parts(InFlight& round) {
  for (size_t begin = 0; begin < round.items.size();) {
    const int m = round.items[begin].model;
    auto& engine = *models_[size_t(m)];
    size_t end = begin;
    views_.clear();
    for (; end < round.items.size() && round.items[end].model == m && int(views_.size()) < engine.max_batch(); ++end) {
      const auto& item = round.items[end];
      views_.push_back(round.frames[size_t(item.frame)].view);
      views_.back().crop = item.box;
    }
    while (pending(m, round) >= engine.max_in_flight()) {
      if (!in_flight_.empty()) {
        deliver();
        continue;
      }
      auto oldest = std::find_if(round.parts.begin(), round.parts.end(),
                                 [&](const InFlight::Part& p) { return p.model == m && !p.collected; });
      engine.collect(oldest->logits);
      oldest->collected = true;
    }
    engine.submit(views_);
    round.parts.push_back({m, false, {}});
    begin = end;
  }
}

void EngineLane::drive() {
  for (;;) {
    take_swaps();
    int max_in_flight = INT32_MAX;
    for (const auto& m : models_) max_in_flight = std::min(max_in_flight, m->max_in_flight());
    // While batches run, only what is already waiting is taken: with nothing new, the batches in flight are
    // delivered at once rather than held until the next frame (a quiet camera, an outage).
    auto frames = hub_->pop_batch(frames_per_batch(), fill_, in_flight_.empty() ? kIdleWait : 0ms, index_);
    auto drained = take_drained();
    if (frames.empty()) {
      if (!in_flight_.empty()) {
        auto& f = in_flight_.back().finished;  // their stream_end follows their last results
        f.insert(f.end(), drained.streams.begin(), drained.streams.end());
        deliver();
        continue;
      }
      if (!drained.streams.empty()) post_.submit(ClassifiedBatch{{}, {}, Clock::now(), std::move(drained.streams), {}, nullptr});
      if (drained.all_done) break;
      continue;
    }
    // What each frame gives to classify: its whole picture, its regions due at this frame.
    std::vector<WorkItem> items;
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto& f = frames[i];
      if (!regions_) {
        items.push_back({int(i), -1, 0, {}, ""});
        continue;
      }
      outside_.clear();
      RegionTable::items_of(*regions_->get(f.stream), int(i), f.index, f.view.shown_width(), f.view.shown_height(), items,
                            &outside_);
      for (const auto& why : outside_) {
        const auto key = fmt::format("{}/{}", f.stream, why);
        if (std::find(warned_.begin(), warned_.end(), key) != warned_.end()) continue;
        warned_.push_back(key);
        vc::log::get("pipeline")->warn("stream {}: {}: the region is not classified", f.stream, why);
      }
    }
    std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) { return a.model < b.model; });
    InFlight round{std::move(frames), std::move(items), {}, std::move(drained.streams), Clock::now()};
    // (the time is taken before submit(): the CPU engine does its work inside it)
    try {
      submit_parts(round);
    } catch (const inference::Interrupted&) {
      // The run is stopping and an engine cut this batch short (a CPU engine takes seconds for one): its frames get
      // no result, counted; their streams' ends still go out. The parts already submitted are collected and dropped.
      for (const auto& p : round.parts) {
        try {
          if (!p.collected) models_[size_t(p.model)]->collect(part_logits_);
        } catch (const std::exception&) {
        }
      }
      for (const auto& f : round.frames) hub_->give_back(f.stream);
      stats_.unclassified += int64_t(round.frames.size());
      if (!round.finished.empty()) post_.submit(ClassifiedBatch{{}, {}, Clock::now(), std::move(round.finished), {}, nullptr});
      continue;
    }
    in_flight_.push_back(std::move(round));
    while (!in_flight_.empty() && (int(in_flight_.size()) >= max_in_flight || front_ready())) deliver();
  }
  while (!in_flight_.empty()) deliver();
}

FrameHub::Drained EngineLane::take_drained() {
  auto drained = hub_->take_drained(index_);
  for (int s : drained.streams) hooks_.drained(s);
  return drained;
}

void EngineLane::deliver() {
  // (the logits first: a round whose engine fails stays in flight, for let_go)
  logits_.clear();
  for (auto& p : in_flight_.front().parts) {
    if (!p.collected) models_[size_t(p.model)]->collect(p.logits);
    p.collected = true;
    logits_.insert(logits_.end(), p.logits.begin(), p.logits.end());
  }
  InFlight b = std::move(in_flight_.front());
  in_flight_.pop_front();
  const auto collected = Clock::now();
  if (!b.items.empty()) stats_.add_batch(b.items.size(), std::chrono::duration<double, std::milli>(collected - b.submitted).count());
  post_.submit(ClassifiedBatch{std::move(b.frames), logits_, collected, std::move(b.finished), std::move(b.items), infos_});
}

void EngineLane::let_go() {
  try {
    std::vector<int> finished;
    for (auto& b : in_flight_) {
      for (const auto& f : b.frames) hub_->give_back(f.stream);
      finished.insert(finished.end(), b.finished.begin(), b.finished.end());
    }
    in_flight_.clear();
    for (;;) {
      auto frames = hub_->pop_batch(frames_per_batch(), 0us, kIdleWait, index_);
      for (const auto& f : frames) hub_->give_back(f.stream);
      auto drained = take_drained();
      finished.insert(finished.end(), drained.streams.begin(), drained.streams.end());
      if (!finished.empty()) post_.submit(ClassifiedBatch{{}, {}, Clock::now(), std::exchange(finished, {}), {}, nullptr});
      if (drained.all_done) break;
    }
  } catch (const std::exception& e) {
    vc::log::get("pipeline")->error("engine {}: while ending its streams: {}", index_, e.what());
  }
}

EngineInfo EngineLane::info() const {
  const auto why = failure();
  return {index(), cuda_device(), engine_name(), &stats(), why ? why->message : ""};
}

}  // namespace vc::pipeline
