// The video side of the run, off the inference thread: for every stream that has an output, a worker that turns
// the frame into BGR, draws the overlay and feeds the encoder, window, RTSP server or image folder — or, with
// output.tiled, one worker that composes every stream into a mosaic (as DeepStream's tiler does). Nothing here
// ever makes the caller (post-processing) wait: files never lose a frame — the batcher holds a file back by
// credits that its output gives back frame by frame, so a slow output slows only its own stream — and live
// streams drop their own oldest waiting frame when the encoder falls behind, counted per stream
// (output_queue.hpp). A frame whose size changes is scaled (aspect kept) to the output's size; odd sizes are
// rounded down to even for the encoder.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/failure.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/core/stats.hpp"

namespace vc::pipeline {

struct LabelledFrame {
  std::shared_ptr<const Frame> frame;
  FrameResult result;
};

class OutputStage {
 public:
  // `streams`: every stream's statistics (names, live, counters), indexed by stream id; `may_drop`: whether the
  // stream drops frames when behind (live) or never does (files); `consumed(stream)`: an output is done with a
  // frame of a stream that never drops (from an output's thread).
  OutputStage(const config::Config& config, std::vector<StreamStats*> streams, std::vector<bool> may_drop,
              std::string engine, std::string model, std::function<void(int)> consumed);
  ~OutputStage();
  OutputStage(const OutputStage&) = delete;
  OutputStage& operator=(const OutputStage&) = delete;

  // Whether frames of this stream are drawn anywhere (if not, nothing is converted or drawn for it).
  [[nodiscard]] bool draws(int stream) const;
  // From the post-processing thread. Never blocks.
  void submit(LabelledFrame item);
  // Drains every worker and finalizes every output (files get their index and their final name).
  void finish();
  // The first failure of any output (set once it happened), e.g. a full disk (IoError) or a closed window.
  [[nodiscard]] std::optional<Failure> failure() const;
  // A window was closed or an output failed: the run should stop.
  [[nodiscard]] bool wants_stop() const { return wants_stop_.load(); }

 private:
  class Worker;
  class StreamWorker;
  class TileWorker;
  std::vector<std::unique_ptr<Worker>> workers_;  // one per stream, or one mosaic
  std::vector<Worker*> route_;                    // stream id -> its worker (null: no output)
  std::vector<StreamStats*> streams_;
  std::vector<bool> may_drop_;
  std::atomic<bool> wants_stop_{false};
  bool finished_ = false;
};

}  // namespace vc::pipeline
