#include "pipeline/runner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "inference/classifier.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/outputs/output_paths.hpp"
#include "pipeline/outputs/output_stage.hpp"
#include "pipeline/post_stage.hpp"
#include "pipeline/results/mqtt_sink.hpp"
#include "pipeline/results/results.hpp"
#include "pipeline/sources/gst_cuda.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

// At the end of a run, how long sources may go on stopping with none of them finishing before one is left behind.
constexpr auto kStopGrace = 3s;
// Frames of a file with a video output that may be between the batcher and the output at once (at least two
// batches' worth).
constexpr int kOutputCredits = 8;
// With nothing in flight, how long the loop waits for a first frame before it looks around (stop requests, progress).
constexpr auto kIdleWait = 200ms;

// Where streams send their events (stream_down, stream_up): the post stage while it takes them, nowhere after. A
// stream left behind at the end (a source that will not stop) may outlive the post stage; it holds this gate, not
// the stage.
class EventGate {
 public:
  void open(PostStage* post) {
    std::lock_guard lock(mutex_);
    post_ = post;
  }
  void submit(StreamEvent e) {
    std::lock_guard lock(mutex_);
    if (post_) post_->submit(std::move(e));
  }
  void close() {
    std::lock_guard lock(mutex_);
    post_ = nullptr;
  }

 private:
  std::mutex mutex_;
  PostStage* post_ = nullptr;
};

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

QueuePolicy queue_policy(const config::Input& in, bool live) {
  const bool drop = in.drop == config::DropPolicy::Drop || (in.drop == config::DropPolicy::Auto && live);
  // A live stream keeps only the freshest frames; a file keeps a few ready so the batcher never waits on it.
  return {drop ? size_t(2) : size_t(8), drop};
}

// "\r  1200/3000 frames (40%)  412.3 fps  ETA 4 s" on a terminal, at most twice a second; elsewhere (a CI log, a pipe,
// systemd) the same as a log line every logging.progress_interval_s, so that a long file shows a sign of life.
// fps = frames / wall time.
class Progress {
 public:
  Progress(bool enabled, double log_interval_s)
      : terminal_(isatty(STDERR_FILENO)), enabled_(enabled && (terminal_ || log_interval_s > 0)),
        interval_(terminal_ ? Clock::duration(500ms)
                            : std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(log_interval_s))) {}
  void update(const std::vector<std::unique_ptr<Stream>>& streams, Clock::time_point start) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < interval_ || (!terminal_ && now - start < interval_)) return;
    last_ = now;
    int64_t done = 0, total = 0;
    bool known = true;
    for (const auto& s : streams) {
      done += s->stats().classified;
      const int64_t expected = s->input().max_frames > 0 ? s->input().max_frames : s->stats().expected.load();
      if (expected > 0 && !s->input().loop) total += expected;
      else known = false;
    }
    const double elapsed = seconds_between(start, now);
    const double fps = elapsed > 0 ? double(done) / elapsed : 0;
    std::string text;
    if (known && total > 0) {
      const double eta = fps > 0 ? double(std::max<int64_t>(total - done, 0)) / fps : 0;
      text = fmt::format("{}/{} frames ({:.0f}%)  {:.1f} fps  ETA {:.0f} s", done, total, 100.0 * double(done) / double(total),
                         fps, eta);
    } else {
      text = fmt::format("{} frames  {:.1f} fps", done, fps);
    }
    if (!terminal_) {
      vc::log::get("progress")->info("{}", text);
      return;
    }
    fmt::print(stderr, "\r  {}   ", text);
    shown_ = true;
  }
  void done() {
    if (shown_) fmt::print(stderr, "\n");
    shown_ = false;
  }

 private:
  bool terminal_, enabled_;
  Clock::duration interval_;
  bool shown_ = false;
  Clock::time_point last_{};
};

// A one-line performance report every logging.perf_interval_s while live streams run (DeepStream's **PERF).
class PerfReport {
 public:
  PerfReport(double interval_s, bool any_live) : interval_(interval_s), enabled_(interval_s > 0 && any_live) {}
  void update(const std::vector<std::unique_ptr<Stream>>& streams) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (last_ == Clock::time_point{}) {
      last_ = now;
      previous_.assign(streams.size(), {0, 0});
      return;
    }
    const double dt = seconds_between(last_, now);
    if (dt < interval_) return;
    std::string line;
    double total = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
      const auto& st = streams[i]->stats();
      const int64_t frames = st.classified, drops = st.queue_dropped + st.output_dropped;
      const double fps = double(frames - previous_[i].first) / dt;
      total += fps;
      line += fmt::format("{}{} {:.1f} fps, {} dropped, p99 {:.0f} ms{}", line.empty() ? "" : " | ", st.name, fps,
                          drops - previous_[i].second, st.latency.percentile_ms(0.99),
                          st.state == StreamState::Reconnecting ? " (reconnecting)"
                          : st.state == StreamState::Failed    ? " (failed)" : "");
      previous_[i] = {frames, drops};
    }
    vc::log::get("perf")->info("{} | total {:.1f} fps", line, total);
    last_ = now;
  }

 private:
  double interval_;
  bool enabled_;
  Clock::time_point last_{};
  std::vector<std::pair<int64_t, int64_t>> previous_;
};

StreamSummary summarize(const Stream& s, bool interrupted, Clock::time_point start) {
  const auto& st = s.stats();
  StreamSummary r;
  r.name = st.name;
  r.source = st.source;
  r.decoder = st.decoder_name();
  r.live = st.live;
  r.gpu_frames = st.gpu_frames;
  r.frames = st.classified;
  r.dropped = st.queue_dropped;
  r.output_dropped = st.output_dropped;
  r.reconnects = st.reconnects;
  r.non_finite = st.non_finite;
  r.failed_images = st.failed_items;
  r.damaged_frames = st.damaged_frames;
  r.lost_frames = st.lost_frames;
  r.fps = st.average_fps();
  if (const int64_t first = st.first_frame_ns) r.first_frame_s = seconds_between(start, from_steady_ns(first));
  if (const int64_t last = st.last_result_ns) r.last_result_s = seconds_between(start, from_steady_ns(last));
  r.latency_mean_ms = st.latency.mean_ms();
  r.latency_p50_ms = st.latency.percentile_ms(0.5);
  r.latency_p99_ms = st.latency.percentile_ms(0.99);
  r.queue_ms = st.queue_wait.mean_ms();
  r.inference_ms = st.inference.mean_ms();
  r.post_ms = st.post.mean_ms();
  r.output_ms = st.output.mean_ms();
  if (auto f = s.failure()) {
    r.status = "failed";
    r.error = f->message;
  } else {
    // A stream that had ended by itself before the stop request is complete.
    r.status = interrupted && st.end_reason_text() == "stopped" ? "interrupted" : "ok";
  }
  return r;
}

}  // namespace

class Runner::Impl final : public RunControl {
 public:
  Impl(const config::Config& config, std::unique_ptr<inference::Classifier> classifier)
      : cfg_(config), classifier_(std::move(classifier)) {
    // Files that cannot be read are said at once, before the model loads and thousands of streams are set up.
    for (const auto& in : cfg_.inputs) {
      if (in.kind == config::InputKind::File) check_readable_file(in.path);
    }
    refuse_overwriting_inputs(cfg_);
    if (!classifier_) classifier_ = inference::Classifier::create(cfg_);
    const std::string model_name = classifier_->architecture().size() > 40 ? "ResNet" : classifier_->architecture();
    // Frames may stay in GPU memory (NVDEC -> our kernel) for streams that have no video output to draw on.
    const bool draw = cfg_.output.kind != config::OutputKind::None;
    if (classifier_->cuda_device() >= 0 && !draw) {
      try {
        cuda_context_ = share_context(make_shared_cuda_context(classifier_->cuda_device()));
      } catch (const Error& e) {
        log_->warn("NVDEC frames will be copied through host memory: {}", e.what());
      }
    }
    std::vector<QueuePolicy> policies;
    for (const auto& in : cfg_.inputs) policies.push_back(queue_policy(in, is_live_input(in)));
    hub_ = std::make_shared<FrameHub>(policies);
    std::vector<StreamStats*> stats;
    std::vector<std::string> names;
    for (size_t i = 0; i < cfg_.inputs.size(); ++i) {
      StreamEnvironment env{hub_, [gate = events_](StreamEvent e) { gate->submit(std::move(e)); }, cuda_context_, stopping_,
                            nullptr};
      streams_.push_back(std::make_unique<Stream>(int(i), cfg_.inputs[i], cuda_context_ != nullptr, env));
      stats.push_back(&streams_.back()->stats());
      names.push_back(streams_.back()->stats().name);
      shared_stats_.push_back(streams_.back()->shared_stats());
    }
    std::vector<bool> may_drop;
    for (const auto& p : policies) may_drop.push_back(p.drop_oldest);
    outputs_ = std::make_unique<OutputStage>(cfg_, stats, may_drop, classifier_->engine_name(), model_name,
                                             [hub = hub_](int stream) { hub->give_back(stream); });
    // A file whose frames are drawn is taken against credits its output gives back: a slow output holds back its
    // own stream, never the engine (and with it every live stream).
    const int credits = std::max(kOutputCredits, 2 * classifier_->max_batch());
    for (size_t i = 0; i < policies.size(); ++i) {
      if (!policies[i].drop_oldest && outputs_->draws(int(i))) hub_->set_credits(int(i), credits);
    }
    std::vector<std::unique_ptr<ResultSink>> sinks;
    if (!cfg_.output.results.empty()) {
      sinks.push_back(std::make_unique<JsonLinesSink>(cfg_.output.results, names, cfg_.output.results_timing));
    }
    if (cfg_.mqtt.enabled) sinks.push_back(std::make_unique<MqttSink>(cfg_.mqtt, names));
    if (!cfg_.events.rules.empty()) {
      event_stage_ = std::make_unique<EventStage>(
          cfg_, stats, classifier_->labels(),
          OverlayMaker{cfg_.overlay, cfg_.smoothing.window, classifier_->engine_name(), model_name}, event_stats_);
      for (size_t i = 0; i < streams_.size(); ++i) streams_[i]->set_packet_sink(event_stage_->packet_sink(int(i)));
    }
    post_ = std::make_unique<PostStage>(cfg_, classifier_->labels(), classifier_->num_classes(), stats, std::move(sinks),
                                        *outputs_, event_stage_.get());
    events_->open(post_.get());  // events come only from running streams, and none runs yet
  }

  // RunControl.
  std::vector<std::shared_ptr<const StreamStats>> streams() const override { return shared_stats_; }
  const EngineStats& engine() const override { return engine_stats_; }
  std::vector<SinkStatus> sinks() const override { return post_->sink_status(); }
  const EventStats* events() const override { return event_stage_ ? &event_stats_ : nullptr; }
  std::string engine_name() const override { return classifier_->engine_name(); }
  int cuda_device() const override { return classifier_->cuda_device(); }

  RunSummary run(const std::atomic<int>& stop) {
    RunSummary summary;
    summary.engine = classifier_->engine_name();
    if (cfg_.output.kind == config::OutputKind::None && cfg_.output.results.empty() && !cfg_.mqtt.enabled &&
        cfg_.events.rules.empty() &&
        !cfg_.metrics.enabled) {
      log_->warn("classifying, but writing nothing: add --output FILE.mp4 or --set output.results=FILE.jsonl (or - for "
                 "stdout)");
    }
    const auto start = Clock::now();
    bool any_live = false, any_file = false;
    for (auto& s : streams_) (s->live() ? any_live : any_file) = true;
    Progress progress(any_file, cfg_.logging.progress_interval_s);
    PerfReport perf(cfg_.logging.perf_interval_s, any_live);
    try {
      for (auto& s : streams_) s->start();
      engine_stats_.ready = true;
      const auto fill = std::chrono::microseconds(int64_t(cfg_.inference.batch_timeout_ms * 1000));
      const size_t max_batch = size_t(classifier_->max_batch());
      for (;;) {
        if (!*stopping_ && (stop.load() > 0 || post_->wants_stop() || outputs_->wants_stop())) {
          *stopping_ = true;
          summary.interrupted = stop.load() > 0;
        }
        // While batches run, only what is already waiting is taken: with nothing new, the batches in flight are
        // delivered at once rather than held until the next frame (a quiet camera, an outage).
        auto frames = hub_->pop_batch(max_batch, fill, in_flight_.empty() ? kIdleWait : 0ms);
        auto drained = hub_->take_drained();
        progress.update(streams_, start);
        perf.update(streams_);
        if (frames.empty()) {
          if (!in_flight_.empty()) {
            auto& f = in_flight_.back().finished;  // their stream_end follows their last results
            f.insert(f.end(), drained.streams.begin(), drained.streams.end());
            deliver();
            continue;
          }
          if (!drained.streams.empty()) post_->submit(ClassifiedBatch{{}, {}, Clock::now(), std::move(drained.streams)});
          if (drained.all_done) break;
          continue;
        }
        views_.clear();
        for (const auto& f : frames) views_.push_back(f.view);
        const auto submitted = Clock::now();  // before submit(): the CPU engine does its work inside it
        classifier_->submit(views_);
        in_flight_.push_back({std::move(frames), std::move(drained.streams), submitted});
        while (!in_flight_.empty() &&
               (int(in_flight_.size()) >= classifier_->max_in_flight() || classifier_->ready())) {
          deliver();
        }
      }
      while (!in_flight_.empty()) deliver();
    } catch (...) {
      try {
        progress.done();
        shut_down(summary);
      } catch (const std::exception& e) {
        log_->error("while finishing after an error: {}", e.what());
      }
      throw;
    }
    progress.done();
    shut_down(summary);
    summary.seconds = seconds_between(start, Clock::now());
    tally(summary, start);
    return summary;
  }

 private:
  struct InFlight {
    std::vector<Frame> frames;
    std::vector<int> finished;
    Clock::time_point submitted;
  };

  void deliver() {
    InFlight b = std::move(in_flight_.front());
    in_flight_.pop_front();
    classifier_->collect(logits_);
    const auto collected = Clock::now();
    engine_stats_.add_batch(b.frames.size(), std::chrono::duration<double, std::milli>(collected - b.submitted).count());
    post_->submit(ClassifiedBatch{std::move(b.frames), logits_, collected, std::move(b.finished)});
  }

  void shut_down(RunSummary& summary) {
    *stopping_ = true;
    hub_->shutdown();
    events_->close();  // a stream left behind below must not reach the post stage once it is gone
    post_->finish();  // (events still open end here, and the sinks hear it)
    outputs_->finish();
    if (event_stage_) event_stage_->finish();  // clips and snapshots written whole
    // Every source tears down at once, and many NVDEC decoders take a while to (120 took over 3 s on the H200): a
    // source is left behind only when no stream at all has finished for kStopGrace — stuck, not slow.
    auto deadline = Clock::now() + kStopGrace;
    size_t finished = 0;
    for (auto& s : streams_) {
      while (!s->join_for(100ms)) {
        const auto now_finished = size_t(std::count_if(streams_.begin(), streams_.end(), [](const auto& x) {
          return !x || x->finished();
        }));
        if (now_finished > finished) {
          finished = now_finished;
          deadline = Clock::now() + kStopGrace;
        }
        if (Clock::now() < deadline) continue;
        log_->warn("stream {}: its source does not stop; leaving it behind", s->stats().name);
        summary.abandoned.push_back(s->stats().name);
        (void)s.release();  // its thread still uses it: never destroy it under that thread
        break;
      }
    }
  }

  // The per-stream rows, the totals and the exit status.
  void tally(RunSummary& summary, Clock::time_point start) const {
    for (auto& s : streams_) {
      if (!s) continue;
      auto row = summarize(*s, summary.interrupted, start);
      summary.frames += row.frames;
      summary.dropped += row.dropped + row.output_dropped;
      summary.streams.push_back(std::move(row));
    }
    // The run's overall percentiles, from every frame of every stream.
    std::vector<double> p50s;
    for (auto& s : streams_) {
      if (s) summary.latency_p99_ms = std::max(summary.latency_p99_ms, s->stats().latency.percentile_ms(0.99));
      if (s) p50s.push_back(s->stats().latency.percentile_ms(0.5));
    }
    if (!p50s.empty()) {
      std::nth_element(p50s.begin(), p50s.begin() + long(p50s.size() / 2), p50s.end());
      summary.latency_p50_ms = p50s[p50s.size() / 2];
    }
    // Exit status: lost results or video first (they lose data the user asked for), then failed streams.
    for (const auto& f : {post_->failure(), outputs_->failure()}) {
      if (!f) continue;
      summary.problems.push_back(f->message);
      if (summary.code == ExitCode::kOk) summary.code = f->code;
    }
    for (const auto& s : streams_) {  // (a stream's failure is in its row of the summary: not repeated here)
      if (!s) continue;
      if (auto f = s->failure()) {
        summary.failed_streams.push_back(s->stats().name);
        if (summary.code == ExitCode::kOk) summary.code = f->code;
      }
    }
    // A stream left behind is not in the table, and what it delivered may be short: never a clean exit.
    for (const auto& name : summary.abandoned) {
      summary.problems.push_back(fmt::format("stream {}: its source did not stop (no stream finished for {} s); left running",
                                             name, std::chrono::seconds(kStopGrace).count()));
      if (summary.code == ExitCode::kOk) summary.code = ExitCode::kUnavailable;
    }
    if (event_stage_) {
      summary.event_count = event_stats_.opened;
      summary.event_clips = event_stats_.clips;
      summary.event_clip_bytes = event_stats_.clip_bytes;
      summary.event_failures = event_stats_.failures + event_stats_.dropped;
      summary.events = fmt::format("{} event(s), {} clip(s), {} snapshot(s) in {}", event_stats_.opened.load(),
                                   event_stats_.clips.load(), event_stats_.snapshots.load(), cfg_.events.dir);
    }
    if (event_stage_ && (event_stats_.failures > 0 || event_stats_.dropped > 0)) {
      // Recording never stops the classification, but what it lost is lost: said, and in the code.
      summary.problems.push_back(fmt::format("events: {} file(s) could not be written, {} dropped (the disk was full or "
                                             "too slow; see the errors above)", event_stats_.failures.load(),
                                             event_stats_.dropped.load()));
      if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
    }
    for (const auto& sink : post_->sink_status()) {
      summary.sink_drops.emplace_back(sink.name, sink.dropped);
      if (sink.dropped == 0) continue;
      // Best-effort sinks never hold the video back, but what they dropped is lost all the same: say so in the code.
      summary.problems.push_back(fmt::format("{}: {} message(s) dropped", sink.name, sink.dropped));
      if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
    }
  }

  const config::Config cfg_;
  std::shared_ptr<spdlog::logger> log_ = vc::log::get("pipeline");
  std::unique_ptr<inference::Classifier> classifier_;
  // What the streams hold jointly with the run (a stream left behind may outlive the run: stream.hpp).
  std::shared_ptr<GstContext> cuda_context_;
  std::shared_ptr<FrameHub> hub_;
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<EventGate> events_ = std::make_shared<EventGate>();
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::shared_ptr<const StreamStats>> shared_stats_;
  std::unique_ptr<OutputStage> outputs_;
  EventStats event_stats_;
  std::unique_ptr<EventStage> event_stage_;  // before post_: the post stage uses it
  std::unique_ptr<PostStage> post_;
  EngineStats engine_stats_;
  std::deque<InFlight> in_flight_;
  std::vector<float> logits_;
  std::vector<inference::FrameView> views_;
};

Runner::Runner(const config::Config& config, std::unique_ptr<inference::Classifier> classifier)
    : impl_(std::make_unique<Impl>(config, std::move(classifier))) {}
Runner::~Runner() = default;
RunControl& Runner::control() { return *impl_; }
RunSummary Runner::run(const std::atomic<int>& stop) { return impl_->run(stop); }

std::string format_summary(const RunSummary& s) {
  std::string out = fmt::format("{:<12} {:>8} {:>7} {:>8} {:>9} {:>9} {:>9}  {}\n", "stream", "frames", "dropped", "fps",
                                "lat mean", "lat p50", "lat p99", "status");
  for (const auto& r : s.streams) {
    std::string status = r.status;
    if (r.reconnects) status += fmt::format(", {} restart(s)", r.reconnects);
    if (r.non_finite) status += fmt::format(", {} NaN frame(s)", r.non_finite);
    if (r.output_dropped) status += fmt::format(", {} not drawn", r.output_dropped);
    if (r.lost_frames) status += fmt::format(", {} lost (undecodable)", r.lost_frames);
    if (r.damaged_frames) status += fmt::format(", {} damaged", r.damaged_frames);
    if (!r.decoder.empty()) status += fmt::format(", {}{}", r.decoder, r.gpu_frames ? " (GPU frames)" : "");
    out += fmt::format("{:<12} {:>8} {:>7} {:>8.1f} {:>6.1f} ms {:>6.1f} ms {:>6.1f} ms  {}\n", r.name, r.frames,
                       r.dropped + r.output_dropped, r.fps, r.latency_mean_ms, r.latency_p50_ms, r.latency_p99_ms, status);
    if (!r.error.empty()) out += fmt::format("{:<12} {}\n", "", r.error);
  }
  const double fps = s.seconds > 0 ? double(s.frames) / s.seconds : 0;
  out += fmt::format("{:<12} {:>8} {:>7} {:>8.1f} {:>9} {:>6.1f} ms {:>6.1f} ms  {:.1f} s{}\n", "total", s.frames, s.dropped,
                     fps, "", s.latency_p50_ms, s.latency_p99_ms, s.seconds, s.interrupted ? ", interrupted" : "");
  if (!s.events.empty()) out += "events: " + s.events + "\n";
  if (!s.streams.empty()) {
    double q = 0, i = 0, p = 0, o = 0;
    for (const auto& r : s.streams) {
      q += r.queue_ms;
      i += r.inference_ms;
      p += r.post_ms;
      o += r.output_ms;
    }
    const double n = double(s.streams.size());
    out += fmt::format("where the time goes (mean per frame): queue {:.1f} ms, preprocess + inference {:.1f} ms, "
                       "post-processing {:.1f} ms, overlay + encode {:.1f} ms\n", q / n, i / n, p / n, o / n);
  }
  return out;
}

}  // namespace vc::pipeline
