// One engine of the run and its thread — one per inference.gpus entry, one in most runs: the frames of the streams
// placed on it, taken from its lane of the batcher -> batches -> the engine, two in flight -> logits -> the post
// stage, each stream's end after its last results. The thread runs until every stream of the run has ended and been
// drained. An engine that fails is reported through a hook; the lane then either ends (the run ends with the error)
// or goes on without its engine, letting go of whatever frames still come to it (their credits given back) and still
// sending its streams' ends.
#pragma once
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "inference/classifier.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/post_stage.hpp"

namespace vc::pipeline {

class EngineLane {
 public:
  struct Hooks {
    std::function<void(int stream)> drained;  // a stream of this lane has ended and been drained
    // The engine failed (`why`: "engine 1 (GPU 1) failed: …"; set as failure() before the call): return true to go
    // on without it (its streams have been told), false to end the lane.
    std::function<bool(EngineLane&, std::exception_ptr, const Failure& why)> failed;
    std::function<void()> finished;           // the thread is about to end
  };

  // `fill`: how long a batch waits to fill once its first frame is there.
  EngineLane(int index, std::unique_ptr<inference::Classifier> classifier, std::shared_ptr<FrameHub> hub, PostStage& post,
             std::chrono::microseconds fill);
  ~EngineLane();
  EngineLane(const EngineLane&) = delete;
  EngineLane& operator=(const EngineLane&) = delete;

  void start(Hooks hooks);
  void join();

  [[nodiscard]] int index() const { return index_; }
  [[nodiscard]] inference::Classifier& classifier() const { return *classifier_; }
  [[nodiscard]] EngineStats& stats() { return stats_; }
  [[nodiscard]] const EngineStats& stats() const { return stats_; }
  // Why its engine failed, once it has.
  [[nodiscard]] std::optional<Failure> failure() const;

 private:
  struct InFlight {
    std::vector<Frame> frames;
    std::vector<int> finished;
    Clock::time_point submitted;
  };
  void run();
  void drive();
  void deliver();
  void let_go();  // after a failure: frames dropped, ends still sent
  Failure failure_of(std::exception_ptr error) const;
  FrameHub::Drained take_drained();

  const int index_;
  std::unique_ptr<inference::Classifier> classifier_;
  std::shared_ptr<FrameHub> hub_;
  PostStage& post_;
  const std::chrono::microseconds fill_;
  Hooks hooks_;
  EngineStats stats_;
  std::deque<InFlight> in_flight_;
  std::vector<float> logits_;
  std::vector<inference::FrameView> views_;
  mutable std::mutex failure_mutex_;
  std::optional<Failure> failure_;
  std::thread thread_;
};

}  // namespace vc::pipeline
