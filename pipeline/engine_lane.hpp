// One engine of the run and its thread — one per inference.gpus entry, one in most runs: the frames of the streams
// placed on it, taken from its lane of the batcher -> each frame's whole picture and regions (regions/), grouped by
// model -> one batch per model on that model's engine, two rounds in flight -> logits -> the post stage, each
// stream's end after its last results. A batch never mixes models; the frames are taken round-robin across the
// streams as before, as many as every model's batch can hold. The thread runs until every stream of the run has ended and been
// drained. An engine that fails is reported through a hook; the lane then either ends (the run ends with the error)
// or goes on without its engine, letting go of whatever frames still come to it (their credits given back) and still
// sending its streams' ends. A model's engine is swapped (a deploy, a rollback) between two batches: the batches in
// flight are delivered by the engine that ran them, then the next batch is the new engine's.
#pragma once
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "inference/classifier.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/core/control.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/post_stage.hpp"
#include "pipeline/regions/region_table.hpp"
#include "pipeline/regions/run_models.hpp"

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

  // `fill`: how long a batch waits to fill once its first frame is there. `models`: an engine per model of the run,
  // in the order of `regions`' models (the whole picture's, "default", first when it is used). `regions` null: every
  // frame is classified whole by models[0].
  // `infos`: what the post stage needs of each model (by model; its name, id and labels follow a swap).
  EngineLane(int index, std::vector<std::unique_ptr<inference::Classifier>> models, std::shared_ptr<FrameHub> hub,
             PostStage& post, std::chrono::microseconds fill, std::shared_ptr<const RegionTable> regions = nullptr,
             std::vector<ModelInfo> infos = {});
  ~EngineLane();
  EngineLane(const EngineLane&) = delete;
  EngineLane& operator=(const EngineLane&) = delete;

  void start(Hooks hooks);
  void join();
  // The run is stopping: every model's engine cuts a slow batch short (Classifier::interrupt).
  void interrupt();

  // Model `model`'s engine becomes `engine` (built for this lane's GPU) before the lane's next batch; `done` is called
  // on the lane's thread with the engine it replaced, once no batch of that one is in flight any more. A lane whose
  // engine failed swaps nothing (`done` is never called).
  void swap(int model, std::unique_ptr<inference::Classifier> engine, ModelInfo info,
            std::function<void(std::unique_ptr<inference::Classifier>)> done);

  [[nodiscard]] int index() const { return index_; }
  // The lane's GPU (-1: the CPU engine) and engine kind ("cuDNN on NVIDIA H100"): its first model's, which a swap
  // keeps.
  [[nodiscard]] int cuda_device() const { return cuda_device_; }
  [[nodiscard]] const std::string& engine_name() const { return engine_name_; }
  [[nodiscard]] EngineStats& stats() { return stats_; }
  [[nodiscard]] const EngineStats& stats() const { return stats_; }
  // Why its engine failed, once it has.
  [[nodiscard]] std::optional<Failure> failure() const;
  [[nodiscard]] EngineInfo info() const;  // what the service shows of it

 private:
  struct InFlight {
    std::vector<Frame> frames;
    std::vector<WorkItem> items;  // what is classified of them, model by model (a part per model, in model order)
    struct Part {                 // one batch submitted to one model's engine
      int model = 0;
      bool collected = false;     // its logits were taken early (an engine that holds fewer batches than a round needs)
      std::vector<float> logits;
    };
    std::vector<Part> parts;      // in the order submitted (model by model; a model's items beyond its batch: more)
    std::vector<int> finished;
    Clock::time_point submitted;
  };
  size_t frames_per_batch() const;
  bool front_ready() const;
  void submit_parts(InFlight& round);
  int pending(int model, const InFlight& round) const;  // its batches submitted and not collected
  void run();
  void drive();
  void deliver();
  void let_go();  // after a failure: frames dropped, ends still sent
  void take_swaps();  // between batches: the swaps asked for, made (every batch in flight delivered first)
  Failure failure_of(std::exception_ptr error) const;
  FrameHub::Drained take_drained();

  const int index_;
  std::vector<std::unique_ptr<inference::Classifier>> models_;  // (swapped on the lane's thread, under models_mutex_)
  mutable std::mutex models_mutex_;
  std::shared_ptr<const std::vector<ModelInfo>> infos_;  // what each batch tells the post stage of its models
  int cuda_device_ = -1;
  std::string engine_name_;
  struct Swap {
    int model;
    std::unique_ptr<inference::Classifier> engine;
    ModelInfo info;
    std::function<void(std::unique_ptr<inference::Classifier>)> done;
  };
  std::mutex swaps_mutex_;
  std::vector<Swap> swaps_;
  std::atomic<bool> swap_waiting_{false};
  std::shared_ptr<const RegionTable> regions_;
  std::shared_ptr<FrameHub> hub_;
  PostStage& post_;
  const std::chrono::microseconds fill_;
  Hooks hooks_;
  EngineStats stats_;
  std::deque<InFlight> in_flight_;
  std::vector<float> logits_, part_logits_;
  std::vector<inference::FrameView> views_;
  std::vector<std::string> outside_;  // regions left out of the last frame (warned once per stream and region)
  std::vector<std::string> warned_;
  mutable std::mutex failure_mutex_;
  std::optional<Failure> failure_;
  std::thread thread_;
};

}  // namespace vc::pipeline
