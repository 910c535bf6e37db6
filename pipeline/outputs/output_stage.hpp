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
#include <deque>
#include <map>
#include <mutex>
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
#include "pipeline/outputs/overlay.hpp"

namespace vc::pipeline {

struct LabelledFrame {
  std::shared_ptr<const Frame> frame;
  FrameResult result;                // the whole picture's (no labels when only its regions are classified)
  std::vector<FrameResult> regions;  // each region's latest result: drawn as its box with its label
};

class OutputStage {
 public:
  // `streams`: every stream's statistics (names, live, counters), indexed by stream id; `may_drop`: whether the
  // stream drops frames when behind (live) or never does (files); `consumed(stream)`: an output is done with a
  // frame of a stream that never drops (from an output's thread).
  // `capacity`: the most streams the run may have (streams added while it runs: add_stream).
  OutputStage(const config::Config& config, std::vector<StreamStats*> streams, std::vector<bool> may_drop,
              std::string engine, std::string model, std::function<void(int)> consumed, size_t capacity = 0);
  ~OutputStage();
  OutputStage(const OutputStage&) = delete;
  OutputStage& operator=(const OutputStage&) = delete;

  // A stream added while the run goes on, before its first frame: its own output, as the others have. Throws
  // vc::ConfigError with output.tiled (a mosaic's layout is fixed).
  void add_stream(int id, StreamStats& stats, bool may_drop);
  // The stream has ended (or was removed): its output is finalized now, without waiting (never blocks).
  void finish_stream(int id);
  // Its output is finalized (or it has none, or shares the mosaic).
  [[nodiscard]] bool stream_finished(int id) const;
  // A finished stream the run lets go of: its worker is joined and destroyed (what failed in it is still reported).
  void release_stream(int id);
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
  std::string file_name(const std::string& stream);
  config::Output output_;
  OverlayMaker overlay_;
  std::map<std::string, int> name_uses_;  // how many streams of each name had an output in this run
  std::function<void(int)> done_;
  mutable std::mutex workers_mutex_;              // workers_ (added to while the run goes on) and finished_
  std::vector<std::unique_ptr<Worker>> workers_;  // one per stream, or one mosaic
  std::optional<Failure> released_failure_;       // the first failure of a worker let go of
  // By stream id, sized for the run's capacity once (the post stage reads them while streams are added: a stream's
  // slot is written before its first frame exists).
  std::vector<Worker*> route_;                    // stream id -> its worker (null: no output)
  std::vector<StreamStats*> streams_;
  std::deque<bool> may_drop_;
  std::atomic<bool> wants_stop_{false};
  bool finished_ = false;
};

}  // namespace vc::pipeline
