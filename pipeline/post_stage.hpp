// Post-processing, off the inference thread: logits -> softmax, top-k, each stream's own smoothing and label-change
// detection -> the event rules (events/) -> every result sink (JSON lines, MQTT, …) and the stream's video output. One thread, so every sink
// sees each stream's results and events in order. Non-finite logits are flagged (results line, summary, a
// warning naming the stream and frame) and never feed the smoothing.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "inference/postprocess.hpp"
#include "pipeline/batching/bounded_queue.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/events/event_stage.hpp"
#include "pipeline/outputs/output_stage.hpp"
#include "pipeline/regions/region_table.hpp"
#include "pipeline/regions/run_models.hpp"
#include "pipeline/results/results.hpp"

namespace vc::pipeline {

class Collector;

// A classified batch: the frames (still holding their buffers), what was classified of them and its logits, item
// after item, each item its model's classes wide. Without items, every frame was classified whole by the first model
// (logits: frames x its classes). `models`: the models that classified it, as its lane had them (a swap changes a
// model's id and labels from one batch to the next); null: the stage's own.
struct ClassifiedBatch {
  std::vector<Frame> frames;
  std::vector<float> logits;
  Clock::time_point collected;
  std::vector<int> finished_streams;  // streams whose last frame was in this batch or before: send stream_end after
  std::vector<WorkItem> items;
  std::shared_ptr<const std::vector<ModelInfo>> models;
};


class PostStage {
 public:
  // `events` may be null (no rules); it outlives the stage. `capacity`: the most streams the run may have.
  PostStage(const config::Config& config, std::vector<ModelInfo> models, std::vector<StreamStats*> streams, std::vector<std::unique_ptr<ResultSink>> sinks, OutputStage& outputs,
            EventStage* events = nullptr, size_t capacity = 0);
  ~PostStage();
  PostStage(const PostStage&) = delete;
  PostStage& operator=(const PostStage&) = delete;

  // From the inference thread; blocks while the stage is a few batches behind.
  void submit(ClassifiedBatch batch);
  // From any thread (stream supervisors): stream_down / stream_up.
  void submit(StreamEvent event);
  // A stream joins the run: before it starts (its frames come after this in the stage's order).
  void add_stream(int id, StreamStats& stats);
  // The latest frames as they are classified: `tap(frame, result)` is called from the stage's thread for each
  // frame of a stream whose flag is set (the service's snapshots); it must not block.
  using FrameTap = std::function<void(const std::shared_ptr<const Frame>&, const FrameResult&)>;
  void set_tap(FrameTap tap, const std::deque<std::atomic<bool>>* wanted) {
    tap_ = std::move(tap);
    wanted_ = wanted;
  }
  // What each stream classifies (its regions), set before the first batch: the overlay draws only the regions a
  // stream has now.
  void set_regions(std::shared_ptr<const RegionTable> regions) { regions_ = std::move(regions); }
  // output.collect: the frames it wants go to it (it outlives the stage).
  void set_collector(Collector* collector) { collector_ = collector; }
  // Every event as it goes to the sinks (the service's recent events); from the stage's thread, must not block.
  void set_event_tap(std::function<void(const StreamEvent&)> tap) { event_tap_ = std::move(tap); }
  // Processes what is queued, ends the events still open (their "end" goes to the sinks), then closes every sink.
  // Safe to call twice.
  void finish();

  // The first sink failure (results could not be written: vc::IoError), once it happened.
  [[nodiscard]] std::optional<Failure> failure() const;
  [[nodiscard]] bool wants_stop() const { return wants_stop_.load(); }
  // What each sink dropped (best-effort sinks), for the summary: (name, count).
  [[nodiscard]] std::vector<SinkStatus> sink_status() const;

 private:
  struct StreamAdded {
    int id;
    std::string name;
  };
  using Item = std::variant<ClassifiedBatch, StreamEvent, StreamAdded>;
  void loop();
  void process(ClassifiedBatch& batch);
  void to_sinks(const FrameResult* r, const StreamEvent* e);
  void to_sinks(const std::vector<StreamEvent>& events);
  void fail(ExitCode code, const std::string& message);

  struct Tracked {  // the whole picture's or one region's
    inference::Smoother smoother;
    LabelChangeDetector labels;
    std::string model_id;  // of the model whose results it smooths
  };
  struct PerStream {
    std::map<std::string, Tracked> tracked;  // by region ("" = the whole picture)
    std::vector<FrameResult> regions;        // each region's latest result (what the overlay draws between them)
    int64_t non_finite_warnings = 0;
  };
  // The result of one item of a frame, its smoothing and label change done.
  FrameResult classify_item(const ModelInfo& model, const Frame& f, const WorkItem& item, std::span<const float> logits, StreamStats& stats,
                            PerStream& st, std::vector<StreamEvent>& changes);

  config::Config config_;
  std::vector<ModelInfo> models_;
  std::vector<StreamStats*> streams_;
  std::vector<std::unique_ptr<ResultSink>> sinks_;
  std::vector<bool> sink_ok_;
  OutputStage& outputs_;
  EventStage* events_;
  std::vector<PerStream> state_;  // by stream id, sized for the capacity once (a stream's slot is set before it starts)
  BoundedQueue<Item> queue_;
  FrameTap tap_;
  Collector* collector_ = nullptr;
  std::shared_ptr<const RegionTable> regions_;
  const std::deque<std::atomic<bool>>* wanted_ = nullptr;
  std::function<void(const StreamEvent&)> event_tap_;
  std::atomic<bool> wants_stop_{false};
  mutable std::mutex failure_mutex_;
  std::optional<Failure> failure_;
  bool finished_ = false;
  std::thread thread_;  // last: started when everything it uses exists
};

}  // namespace vc::pipeline
