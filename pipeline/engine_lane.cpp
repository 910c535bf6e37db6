#include "pipeline/engine_lane.hpp"

#include <utility>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "config/logging.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

// With nothing in flight, how long the engine waits for a first frame before it looks again (the end of the run).
constexpr auto kIdleWait = 200ms;

}  // namespace

EngineLane::EngineLane(int index, std::unique_ptr<inference::Classifier> classifier, std::shared_ptr<FrameHub> hub,
                       PostStage& post, std::chrono::microseconds fill)
    : index_(index), classifier_(std::move(classifier)), hub_(std::move(hub)), post_(post), fill_(fill) {}

EngineLane::~EngineLane() { join(); }

void EngineLane::start(Hooks hooks) {
  hooks_ = std::move(hooks);
  thread_ = std::thread([this] { run(); });
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
  const int gpu = classifier_->cuda_device();
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

void EngineLane::drive() {
  const size_t max_batch = size_t(classifier_->max_batch());
  for (;;) {
    // While batches run, only what is already waiting is taken: with nothing new, the batches in flight are
    // delivered at once rather than held until the next frame (a quiet camera, an outage).
    auto frames = hub_->pop_batch(max_batch, fill_, in_flight_.empty() ? kIdleWait : 0ms, index_);
    auto drained = take_drained();
    if (frames.empty()) {
      if (!in_flight_.empty()) {
        auto& f = in_flight_.back().finished;  // their stream_end follows their last results
        f.insert(f.end(), drained.streams.begin(), drained.streams.end());
        deliver();
        continue;
      }
      if (!drained.streams.empty()) post_.submit(ClassifiedBatch{{}, {}, Clock::now(), std::move(drained.streams)});
      if (drained.all_done) break;
      continue;
    }
    views_.clear();
    for (const auto& f : frames) views_.push_back(f.view);
    const auto submitted = Clock::now();  // before submit(): the CPU engine does its work inside it
    in_flight_.push_back({std::move(frames), std::move(drained.streams), submitted});
    classifier_->submit(views_);
    while (!in_flight_.empty() && (int(in_flight_.size()) >= classifier_->max_in_flight() || classifier_->ready())) {
      deliver();
    }
  }
  while (!in_flight_.empty()) deliver();
}

FrameHub::Drained EngineLane::take_drained() {
  auto drained = hub_->take_drained(index_);
  for (int s : drained.streams) hooks_.drained(s);
  return drained;
}

void EngineLane::deliver() {
  classifier_->collect(logits_);  // (first: a batch whose engine fails stays in flight, for let_go)
  InFlight b = std::move(in_flight_.front());
  in_flight_.pop_front();
  const auto collected = Clock::now();
  stats_.add_batch(b.frames.size(), std::chrono::duration<double, std::milli>(collected - b.submitted).count());
  post_.submit(ClassifiedBatch{std::move(b.frames), logits_, collected, std::move(b.finished)});
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
      auto frames = hub_->pop_batch(size_t(classifier_->max_batch()), 0us, kIdleWait, index_);
      for (const auto& f : frames) hub_->give_back(f.stream);
      auto drained = take_drained();
      finished.insert(finished.end(), drained.streams.begin(), drained.streams.end());
      if (!finished.empty()) post_.submit(ClassifiedBatch{{}, {}, Clock::now(), std::exchange(finished, {})});
      if (drained.all_done) break;
    }
  } catch (const std::exception& e) {
    vc::log::get("pipeline")->error("engine {}: while ending its streams: {}", index_, e.what());
  }
}

}  // namespace vc::pipeline
