#include "pipeline/outputs/output_stage.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "config/errors.hpp"
#include "config/logging.hpp"
#include "config/thread_name.hpp"
#include "pipeline/outputs/output_queue.hpp"
#include "pipeline/outputs/frame_image.hpp"
#include "pipeline/outputs/overlay.hpp"
#include "pipeline/outputs/video_output.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;
constexpr int kMinSide = 16;
constexpr size_t kQueue = 8;

int even(int v) { return v & ~1; }

// Where a stream's timeline starts: the capture time of its first frame (live) and the first frame's own timestamp
// (files).
struct TimelineOrigin {
  std::optional<Clock::time_point> captured;
  std::optional<int64_t> pts_ns;
};

// The time of a frame on its stream's timeline, from 0: files by their own timestamps (a variable frame rate or a
// container without one keeps its real timing; frame number / rate when there are none), live sources by when
// they were captured (drops leave real gaps instead of compressing the timeline).
int64_t stream_time_ns(const Frame& f, bool live, TimelineOrigin& origin) {
  if (!origin.captured) origin.captured = f.captured;
  if (!origin.pts_ns) origin.pts_ns = f.pts_ns;
  if (live) return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(f.captured - *origin.captured).count());
  if (f.pts_ns >= 0 && *origin.pts_ns >= 0) return std::max<int64_t>(0, f.pts_ns - *origin.pts_ns);
  const double fps = f.fps > 0 ? f.fps : 30.0;
  return int64_t(double(f.index) * 1e9 / fps);
}

}  // namespace

// One thread with a queue; subclasses turn items into output frames. `consumed(stream)` is called once the
// worker is done with a frame of a stream that never drops (its credit goes back to the batcher).
class OutputStage::Worker {
 public:
  Worker(std::atomic<bool>& wants_stop, std::function<void(int)> consumed)
      : wants_stop_(wants_stop), consumed_(std::move(consumed)), queue_(kQueue) {}
  virtual ~Worker() = default;

  void start() {
    thread_ = std::thread([this] {
      name_this_thread("vc-output");
      loop();
    });
  }

  // Never blocks (output_queue.hpp).
  void submit(LabelledFrame item, StreamStats& stats, bool may_drop) {
    const int stream = item.result.stream;
    stats.output_dropped += queue_.push(stream, may_drop, std::move(item));
  }

  // No more frames: the worker writes what is queued, finalizes its outputs and ends (close() returns at once).
  void close() { queue_.close(); }
  // Its outputs are finalized (after close(): the loop has ended).
  [[nodiscard]] bool done() const { return done_.load(); }
  void finish() {
    queue_.close();
    if (thread_.joinable()) thread_.join();
  }

  std::optional<Failure> failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }

 protected:
  virtual void handle(const LabelledFrame& item) = 0;
  virtual void tick() {}
  virtual void close_outputs() = 0;

 private:
  void record(ExitCode code, const std::string& message) {
    std::lock_guard lock(mutex_);
    if (!failure_) {
      failure_ = Failure{code, message};
      vc::log::get("pipeline")->error("output: {}", message);
    }
    wants_stop_ = true;
  }

  void loop() {
    for (;;) {
      auto item = queue_.pop(20ms);
      if (!item && queue_.closed_and_empty()) break;
      if (!failure()) {  // a failed output takes no more frames (the failure is reported)
        try {
          if (item) handle(item->second);
          tick();
        } catch (const Error& e) {
          record(e.code(), e.what());
        } catch (const std::exception& e) {
          record(ExitCode::kInternal, e.what());
        }
      }
      if (item && consumed_) consumed_(item->first);
    }
    try {
      close_outputs();
    } catch (const Error& e) {
      record(e.code(), e.what());
    } catch (const std::exception& e) {
      record(ExitCode::kInternal, e.what());
    }
    done_ = true;
  }

  std::atomic<bool>& wants_stop_;
  std::function<void(int)> consumed_;
  OutputQueue<LabelledFrame> queue_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  mutable std::mutex mutex_;
  std::optional<Failure> failure_;
};

// One stream's own output, opened at its first frame (whose size it takes unless output.width/height say).
class OutputStage::StreamWorker final : public OutputStage::Worker {
 public:
  StreamWorker(std::atomic<bool>& wants_stop, std::function<void(int)> consumed, const config::Output& output,
               OverlayMaker overlay, StreamStats& stats, std::string file_name)
      : Worker(wants_stop, std::move(consumed)), output_(output), overlay_(std::move(overlay)), stats_(stats),
        file_name_(std::move(file_name)) {}

 private:
  void handle(const LabelledFrame& item) override {
    const auto started = Clock::now();
    const Frame& f = *item.frame;
    cv::Mat image = to_bgr(f.view);
    draw_regions(image, item.regions, overlay_.style);  // (at the picture's own size: the boxes are in its pixels)
    if (output_.kind != config::OutputKind::Images) {
      if (!video_) open(f, image.size());
      image = fit_into(image, size_);
    } else if (!video_) {
      open(f, image.size());
    }
    const int64_t t = stream_time_ns(f, stats_.live, origin_);
    draw_overlay(image, overlay_.make(item.result, stats_, f.pts_ns >= 0 && !stats_.live ? f.pts_ns : t), overlay_.style);
    const int64_t skipped = video_->dropped();
    video_->push({image, t, f.index, stats_.name, f.source});
    stats_.output_dropped += video_->dropped() - skipped;  // an RTSP client that is behind
    stats_.output.add(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  }

  void open(const Frame& f, cv::Size frame_size) {
    VideoOutput::Options o;
    o.output = output_;
    o.name = "stream " + stats_.name;
    o.fps = f.fps > 0 ? f.fps : 30;
    const int w = output_.width > 0 ? output_.width : frame_size.width;
    const int h = output_.height > 0 ? output_.height : frame_size.height;
    if (output_.kind != config::OutputKind::Images && (w < kMinSide || h < kMinSide)) {
      throw DataError(fmt::format("stream {}: frames of {}x{} are too small to encode (at least {}x{}); set "
                                  "output.width and output.height to scale them", stats_.name, w, h, kMinSide, kMinSide));
    }
    size_ = cv::Size(even(w), even(h));  // 4:2:0 H.264 needs even sizes
    o.width = size_.width;
    o.height = size_.height;
    o.path = config::for_stream(output_.kind == config::OutputKind::Rtsp ? output_.rtsp_path : output_.path, file_name_);
    video_ = VideoOutput::open(o);
  }

  void close_outputs() override {
    if (video_) video_->finish();
  }

  config::Output output_;
  OverlayMaker overlay_;
  StreamStats& stats_;
  std::string file_name_;  // {stream} in the output's path: the stream's name (NAME-2, … for a name back in the run)
  std::unique_ptr<VideoOutput> video_;
  cv::Size size_;
  TimelineOrigin origin_;
};

// Every stream in one mosaic. Mosaic frame k (time k/fps) is composed once every running stream has reached that
// time (files) — or, when a stream is live, at the latest half a second after it is due by the clock.
class OutputStage::TileWorker final : public OutputStage::Worker {
 public:
  TileWorker(std::atomic<bool>& wants_stop, std::function<void(int)> consumed, const config::Output& output,
             OverlayMaker overlay, std::vector<StreamStats*> streams)
      : Worker(wants_stop, std::move(consumed)), output_(output), overlay_(std::move(overlay)), streams_(std::move(streams)) {
    const int n = int(streams_.size());
    cols_ = int(std::ceil(std::sqrt(double(n))));
    rows_ = (n + cols_ - 1) / cols_;
    size_ = cv::Size(even(output.width > 0 ? output.width : 1920), even(output.height > 0 ? output.height : 1080));
    tile_ = cv::Size(even(size_.width / cols_), even(size_.height / rows_));
    if (tile_.width < kMinSide || tile_.height < kMinSide) {
      throw ConfigError(fmt::format("output.tiled: {} streams do not fit a {}x{} mosaic (tiles of {}x{}); set a larger "
                                    "output.width/height", n, size_.width, size_.height, tile_.width, tile_.height));
    }
    tiles_.resize(size_t(n));
    times_.assign(size_t(n), -1);
    any_live_ = std::any_of(streams_.begin(), streams_.end(), [](const StreamStats* s) { return s->live; });
    origin_ = Clock::now();
    origins_.resize(size_t(n));
    for (auto& o : origins_) o.captured = origin_;  // live tiles are timed on the mosaic's clock
  }

 private:
  void handle(const LabelledFrame& item) override {
    const Frame& f = *item.frame;
    if (!video_) open(f.fps);
    const size_t s = size_t(f.stream);
    cv::Mat picture = to_bgr(f.view);
    draw_regions(picture, item.regions, overlay_.style);
    cv::Mat tile = fit_into(picture, tile_);  // the overlay then scales its text to the tile
    const int64_t t = stream_time_ns(f, streams_[s]->live, origins_[s]);
    // Each tile its own panel, its stream's name large on it, and a border between the tiles.
    auto content = overlay_.make(item.result, *streams_[s], t);
    content.title = streams_[s]->name;
    draw_overlay(tile, content, overlay_.style);
    cv::rectangle(tile, cv::Rect(0, 0, tile.cols, tile.rows), cv::Scalar(48, 48, 48), std::max(1, tile.rows / 270));
    tiles_[s] = tile;
    times_[s] = t;
    pending_ = true;
  }

  void tick() override { emit_due(false); }

  void open(double fps) {
    fps_ = fps > 0 ? fps : 30;
    VideoOutput::Options o;
    o.output = output_;
    o.name = "mosaic";
    o.fps = fps_;
    o.width = size_.width;
    o.height = size_.height;
    o.path = output_.kind == config::OutputKind::Rtsp ? output_.rtsp_path : output_.path;
    video_ = VideoOutput::open(o);
  }

  bool due(int64_t t_ns) const {
    bool all_done = true;
    int64_t latest = -1;
    for (size_t s = 0; s < streams_.size(); ++s) {
      const auto state = streams_[s]->state.load();
      all_done &= state == StreamState::Ended || state == StreamState::Failed;
      latest = std::max(latest, times_[s]);
    }
    if (all_done) return t_ns <= latest;  // the end: up to the last frame that arrived, no further
    if (any_live_ && Clock::now() - origin_ >= std::chrono::nanoseconds(t_ns) + 500ms) return true;
    for (size_t s = 0; s < streams_.size(); ++s) {
      const auto state = streams_[s]->state.load();
      const bool done = state == StreamState::Ended || state == StreamState::Failed;
      if (!done && times_[s] < t_ns) return false;
    }
    return true;
  }

  void emit_due(bool final) {
    if (!video_) return;
    for (;;) {
      const auto t = int64_t(double(next_) * 1e9 / fps_);
      if (!due(t) && !(final && pending_)) return;
      compose(t);
      ++next_;
      if (final) return;
    }
  }

  void compose(int64_t t) {
    cv::Mat mosaic(size_, CV_8UC3, cv::Scalar(0, 0, 0));
    for (size_t s = 0; s < tiles_.size(); ++s) {
      if (tiles_[s].empty()) continue;
      const int c = int(s) % cols_, r = int(s) / cols_;
      tiles_[s].copyTo(mosaic(cv::Rect(c * tile_.width, r * tile_.height, tile_.width, tile_.height)));
    }
    video_->push({mosaic, t, next_, "mosaic", ""});
    pending_ = false;
  }

  void close_outputs() override {
    if (!video_) return;
    emit_due(true);
    video_->finish();
  }

  config::Output output_;
  OverlayMaker overlay_;
  std::vector<StreamStats*> streams_;
  int cols_ = 1, rows_ = 1;
  cv::Size size_, tile_;
  std::vector<cv::Mat> tiles_;
  std::vector<int64_t> times_;
  bool any_live_ = false, pending_ = false;
  double fps_ = 30;
  int64_t next_ = 0;
  Clock::time_point origin_;
  std::vector<TimelineOrigin> origins_;  // per stream
  std::unique_ptr<VideoOutput> video_;
};

OutputStage::OutputStage(const config::Config& cfg, std::vector<StreamStats*> streams, std::vector<bool> may_drop,
                         std::string engine, std::string model, std::function<void(int)> consumed, size_t capacity)
    : output_(cfg.output), overlay_{cfg.overlay, cfg.smoothing.window, std::move(engine), std::move(model)} {
  capacity = std::max(capacity, streams.size());
  route_.assign(capacity, nullptr);
  may_drop_.assign(capacity, false);
  std::copy(may_drop.begin(), may_drop.end(), may_drop_.begin());
  streams_.assign(capacity, nullptr);
  std::copy(streams.begin(), streams.end(), streams_.begin());
  // A frame of a stream that never drops is handed back to the batcher once its output is done with it.
  done_ = [this, consumed = std::move(consumed)](int stream) {
    if (consumed && !may_drop_.at(size_t(stream))) consumed(stream);
  };
  if (cfg.output.kind == config::OutputKind::None) return;
  if (cfg.output.kind == config::OutputKind::Display) display_sink(true);  // no display: say so now, not mid-run
  if (cfg.output.tiled) {
    workers_.push_back(std::make_unique<TileWorker>(wants_stop_, done_, cfg.output, overlay_, streams));
    for (size_t s = 0; s < streams.size(); ++s) route_[s] = workers_.back().get();
  } else {
    for (size_t s = 0; s < streams.size(); ++s) {
      workers_.push_back(
          std::make_unique<StreamWorker>(wants_stop_, done_, cfg.output, overlay_, *streams[s], file_name(streams[s]->name)));
      route_[s] = workers_.back().get();
    }
  }
  for (auto& w : workers_) w->start();
}

OutputStage::~OutputStage() {
  try {
    finish();
  } catch (...) {
  }
}

void OutputStage::add_stream(int id, StreamStats& stats, bool may_drop) {
  const size_t s = size_t(id);
  if (s >= route_.size()) throw InternalError(fmt::format("stream {}: beyond the run's capacity of {}", id, route_.size()));
  streams_[s] = &stats;
  may_drop_[s] = may_drop;
  if (output_.kind == config::OutputKind::None) return;
  if (output_.tiled) {
    throw ConfigError("output.tiled: a mosaic is laid out for the streams it starts with; a stream cannot join it while "
                      "it runs (use per-stream outputs: {stream} in output.path)");
  }
  std::lock_guard lock(workers_mutex_);
  if (finished_) throw UnavailableError(fmt::format("stream {}: the run is ending", stats.name));
  // A name back in the run (removed, then added again) writes NAME-2, …: what it wrote before is never replaced.
  auto worker = std::make_unique<StreamWorker>(wants_stop_, done_, output_, overlay_, stats, file_name(stats.name));
  worker->start();
  route_[s] = worker.get();
  workers_.push_back(std::move(worker));
}

std::string OutputStage::file_name(const std::string& stream) {
  const int uses = ++name_uses_[stream];
  return uses == 1 ? stream : fmt::format("{}-{}", stream, uses);
}

void OutputStage::finish_stream(int id) {
  std::lock_guard lock(workers_mutex_);
  Worker* w = route_.at(size_t(id));
  if (w && !output_.tiled) w->close();  // its file gets its index and final name; the stage's finish() joins it
}

bool OutputStage::stream_finished(int id) const {
  std::lock_guard lock(workers_mutex_);
  const Worker* w = route_.at(size_t(id));
  return !w || output_.tiled || w->done();
}

void OutputStage::release_stream(int id) {
  std::unique_ptr<Worker> worker;
  {
    std::lock_guard lock(workers_mutex_);
    Worker* w = route_.at(size_t(id));
    if (!w || output_.tiled || !w->done()) return;
    route_[size_t(id)] = nullptr;
    const auto it = std::find_if(workers_.begin(), workers_.end(), [&](const auto& p) { return p.get() == w; });
    if (it == workers_.end()) return;
    worker = std::move(*it);
    workers_.erase(it);
    if (!released_failure_) released_failure_ = worker->failure();
  }
  worker->finish();  // (its loop has ended: the join is immediate)
}

bool OutputStage::draws(int stream) const { return route_.at(size_t(stream)) != nullptr; }

void OutputStage::submit(LabelledFrame item) {
  const size_t stream = size_t(item.result.stream);
  if (Worker* w = route_.at(stream)) w->submit(std::move(item), *streams_.at(stream), may_drop_.at(stream));
}

void OutputStage::finish() {
  std::lock_guard lock(workers_mutex_);
  if (finished_) return;
  finished_ = true;
  for (auto& w : workers_) w->finish();
}

std::optional<Failure> OutputStage::failure() const {
  std::lock_guard lock(workers_mutex_);
  if (released_failure_) return released_failure_;
  for (const auto& w : workers_) {
    if (auto f = w->failure()) return f;
  }
  return std::nullopt;
}

}  // namespace vc::pipeline
