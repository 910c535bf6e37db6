#include "pipeline/runner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "inference/classifier.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/engine_lane.hpp"
#include "pipeline/event_gate.hpp"
#include "pipeline/outputs/collector.hpp"
#include "pipeline/outputs/output_paths.hpp"
#include "pipeline/outputs/output_stage.hpp"
#include "pipeline/post_stage.hpp"
#include "pipeline/recent_events.hpp"
#include "pipeline/results/mqtt_sink.hpp"
#include "pipeline/results/results.hpp"
#include "pipeline/run_report.hpp"
#include "pipeline/snapshots.hpp"
#include "pipeline/stream_placer.hpp"
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
// Sources opened at once when the run starts.
constexpr size_t kStartThreads = 16;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

QueuePolicy queue_policy(const config::Input& in, bool live) {
  const bool drop = in.drop == config::DropPolicy::Drop || (in.drop == config::DropPolicy::Auto && live);
  // A live stream keeps only the freshest frames; a file keeps a few ready so the batcher never waits on it.
  return {drop ? size_t(2) : size_t(8), drop};
}

}  // namespace

class Runner::Impl final : public RunControl {
 public:
  Impl(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> engines)
      : cfg_(config),
        capacity_(cfg_.api.enabled ? std::max(cfg_.inputs.size(), size_t(cfg_.api.max_streams)) : cfg_.inputs.size()),
        events_(std::make_shared<EventGate>(capacity_)), owner_(capacity_, nullptr) {
    // Files that cannot be read are said at once, before the model loads and thousands of streams are set up.
    for (const auto& in : cfg_.inputs) {
      if (in.kind == config::InputKind::File) check_readable_file(in.path);
    }
    refuse_overwriting_inputs(cfg_);
    if (engines.empty()) engines = inference::Classifier::create_all(cfg_);
    engines_ = std::move(engines);  // (lanes are made with the post stage, below)
    classifier_ = engines_.front().get();
    effective_ = cfg_;
    try {  // what /config shows: the model file's card merged in, as the run has it
      const auto model = inference::model_settings(cfg_);
      effective_.model = model.model;
      effective_.model.weights = cfg_.model.weights;
    } catch (const Error&) {
    }
    const std::string model_name = classifier_->architecture().size() > 40 ? "ResNet" : classifier_->architecture();
    const OverlayMaker overlay{cfg_.overlay, cfg_.smoothing.window, classifier_->engine_name(), model_name};
    // Frames may stay in GPU memory (NVDEC -> our kernel) for streams that have no video output to draw on: each
    // engine's decoders share its CUDA context.
    const bool draw = cfg_.output.kind != config::OutputKind::None;
    std::vector<int> devices;
    std::vector<std::shared_ptr<GstContext>> contexts;
    for (auto& engine : engines_) {
      const int device = engine->cuda_device();
      devices.push_back(device);
      std::shared_ptr<GstContext> context;
      for (size_t i = 0; i < contexts.size(); ++i) {  // two engines on one GPU share its context
        if (devices[i] == device) context = contexts[i];
      }
      if (!context && device >= 0 && !draw) {
        try {
          context = share_context(make_shared_cuda_context(device));
        } catch (const Error& e) {
          log_->warn("NVDEC frames will be copied through host memory: {}", e.what());
        }
      }
      contexts.push_back(context);
      gpu_frames_ = gpu_frames_ || context != nullptr;
    }
    std::vector<QueuePolicy> policies;
    for (const auto& in : cfg_.inputs) policies.push_back(queue_policy(in, is_live_input(in)));
    hub_ = std::make_shared<FrameHub>(policies, engines_.size());
    placer_ = std::make_shared<StreamPlacer>(hub_, devices, std::move(contexts));
    if (engines_.size() > 1) {
      std::string which;
      for (const int d : devices) which += fmt::format("{}{}", which.empty() ? "" : ", ", d >= 0 ? fmt::format("GPU {}", d) : "CPU");
      log_->info("{} engines ({}): each stream is decoded and classified on the one with the least decoding to do "
                 "when it starts", engines_.size(), which);
    }
    hub_->keep_open(cfg_.api.enabled);  // a service runs on with no stream, until it is stopped
    std::vector<StreamStats*> stats;
    std::vector<std::string> names;
    for (size_t i = 0; i < cfg_.inputs.size(); ++i) {
      streams_.push_back(std::make_unique<Stream>(int(i), cfg_.inputs[i], gpu_frames_, environment()));
      owner_[i] = streams_.back().get();
      stats.push_back(&streams_.back()->stats());
      names.push_back(streams_.back()->stats().name);
      shared_stats_.push_back(streams_.back()->shared_stats());
    }
    std::vector<bool> may_drop;
    for (const auto& p : policies) may_drop.push_back(p.drop_oldest);
    outputs_ = std::make_unique<OutputStage>(cfg_, stats, may_drop, classifier_->engine_name(), model_name,
                                             [hub = hub_](int stream) { hub->give_back(stream); }, capacity_);
    // A file whose frames are drawn is taken against credits its output gives back: a slow output holds back its
    // own stream, never the engine (and with it every live stream).
    for (size_t i = 0; i < policies.size(); ++i) {
      if (!policies[i].drop_oldest && outputs_->draws(int(i))) hub_->set_credits(int(i), output_credits());
    }
    std::vector<std::unique_ptr<ResultSink>> sinks;
    if (!cfg_.output.results.empty()) {
      sinks.push_back(std::make_unique<JsonLinesSink>(cfg_.output.results, names, cfg_.output.results_timing));
    }
    if (cfg_.mqtt.enabled) sinks.push_back(std::make_unique<MqttSink>(cfg_.mqtt, names));
    if (!cfg_.events.rules.empty()) {
      event_stage_ = std::make_unique<EventStage>(cfg_, stats, classifier_->labels(), overlay, event_stats_, capacity_);
      for (size_t i = 0; i < streams_.size(); ++i) streams_[i]->set_packet_sink(event_stage_->packet_sink(int(i)));
    }
    post_ = std::make_unique<PostStage>(cfg_, classifier_->labels(), classifier_->num_classes(), stats, std::move(sinks),
                                        *outputs_, event_stage_.get(), capacity_);
    if (cfg_.api.enabled) {
      snapshots_ = std::make_unique<Snapshots>(
          capacity_, std::chrono::milliseconds(int64_t(cfg_.api.snapshot_interval_s * 1000)), overlay);
      post_->set_tap([s = snapshots_.get()](const auto& frame, const FrameResult& r) { s->take(frame, r); },
                     snapshots_->wanted());
    }
    post_->set_event_tap([this](const StreamEvent& e) { recent_.add(e); });
    const auto fill = std::chrono::microseconds(int64_t(cfg_.inference.batch_timeout_ms * 1000));
    for (auto& engine : engines_) {
      lanes_.push_back(std::make_unique<EngineLane>(int(lanes_.size()), std::move(engine), hub_, *post_, fill));
    }
    engines_.clear();
    if (!cfg_.output.collect_dir.empty()) {
      collector_ = std::make_unique<Collector>(cfg_.output, capacity_);
      post_->set_collector(collector_.get());
    }
    events_->open(post_.get());  // events come only from running streams, and none runs yet
  }

  // RunControl.
  std::vector<std::shared_ptr<const StreamStats>> streams() const override {
    std::lock_guard lock(streams_mutex_);
    return shared_stats_;
  }
  const EngineStats& engine() const override { return lanes_.front()->stats(); }
  std::vector<EngineInfo> engines() const override {
    std::vector<EngineInfo> out;
    for (const auto& l : lanes_) {
      const auto failure = l->failure();
      out.push_back({l->index(), l->classifier().cuda_device(), l->classifier().engine_name(), &l->stats(),
                     failure ? failure->message : ""});
    }
    return out;
  }
  std::vector<SinkStatus> sinks() const override { return post_->sink_status(); }
  const EventStats* events() const override { return event_stage_ ? &event_stats_ : nullptr; }
  std::string engine_name() const override { return classifier_->engine_name(); }
  int cuda_device() const override { return classifier_->cuda_device(); }
  const config::Config& config() const override { return effective_; }

  std::vector<config::Input> inputs() const override {
    std::vector<config::Input> out;
    std::lock_guard lock(streams_mutex_);
    for (const auto& s : streams_) {
      if (s && !s->removed() && !s->stats().closed) out.push_back(s->input());
    }
    return out;
  }

  void add_stream(const config::Input& input) override {
    std::lock_guard change(change_mutex_);
    if (!accepting_) throw RequestError(503, *stopping_ ? "the run is stopping" : "the run is starting");
    if (cfg_.output.kind != config::OutputKind::None && cfg_.output.tiled) {
      throw ConfigError("output.tiled: a mosaic is laid out for the streams it starts with; a stream cannot join it "
                        "while it runs (use one output per stream: {stream} in output.path)", "output.tiled");
    }
    if (input.kind == config::InputKind::File) check_readable_file(input.path);
    {
      config::Config alone = cfg_;  // its outputs must not write over what it reads
      alone.inputs = {input};
      refuse_overwriting_inputs(alone);
    }
    const int id = free_slot(input.name);
    const bool reused = id < int(hub_->streams());
    placer_->assignment().release(id);  // (a placement its last stream made late, as it ended)
    const auto policy = queue_policy(input, is_live_input(input));
    // Its frames wait in the batcher, held, until every stage knows the stream; its events wait at the gate.
    if (reused) hub_->reopen(id, policy, true);
    else if (hub_->add_stream(policy, true) != id) throw InternalError("stream slots out of step with the batcher");
    events_->hold(id);
    auto stream = std::make_unique<Stream>(id, input, gpu_frames_, environment());
    StreamStats& stats = stream->stats();
    try {
      if (event_stage_) {
        event_stage_->add_stream(id, stats);
        stream->set_packet_sink(event_stage_->packet_sink(id));
      }
      stream->start();
    } catch (...) {
      hub_->discard(id);
      events_->forget(id);
      placer_->assignment().release(id);
      std::lock_guard lock(streams_mutex_);
      refused_.push_back(std::move(stream));  // (the event stage may have its statistics: kept, never shown)
      discarded_.push_back(id);               // its slot serves the next stream
      throw;
    }
    try {
      outputs_->add_stream(id, stats, policy.drop_oldest);
    } catch (...) {  // (the run is ending): the stream stops again, and is joined with the others
      stream->remove();
      hub_->discard(id);
      events_->forget(id);
      placer_->assignment().release(id);
      std::lock_guard lock(streams_mutex_);
      streams_.push_back(std::move(stream));
      throw;
    }
    if (!policy.drop_oldest && outputs_->draws(id)) hub_->set_credits(id, output_credits());
    if (snapshots_) snapshots_->reset(id);
    recent_.forget_last(input.name);
    post_->add_stream(id, stats);
    events_->admit(id);
    {
      std::lock_guard lock(streams_mutex_);
      owner_[size_t(id)] = stream.get();
      shared_stats_.push_back(stream->shared_stats());
      streams_.push_back(std::move(stream));
    }
    hub_->release(id);
    added_live_ = added_live_ || stats.live;
    log_->info("stream {} added ({})", input.name, stats.source);
  }

  bool remove_stream(const std::string& name, std::chrono::milliseconds wait) override {
    Stream* stream = nullptr;
    int id = -1;
    {
      std::lock_guard lock(streams_mutex_);
      for (size_t i = 0; i < owner_.size(); ++i) {
        if (owner_[i] && owner_[i]->stats().name == name && !owner_[i]->removed() && !owner_[i]->stats().closed) {
          stream = owner_[i];
          id = int(i);
        }
      }
      if (!stream) throw RequestError(404, fmt::format("no running stream is named '{}'", name));
      stream->remove();  // it ends as at the end of its input: what is queued goes through, then its end
    }
    log_->info("stream {}: removing", name);
    const auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline) {
      if (stream->stats().closed && outputs_->stream_finished(id) && stream->finished()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  std::optional<Snapshot> snapshot(const std::string& name, int max_width, std::chrono::milliseconds wait) override {
    if (!snapshots_) throw RequestError(404, "snapshots are made for the service's API only (api.enabled)");
    int id = -1;
    std::shared_ptr<const StreamStats> stats;
    {
      std::lock_guard lock(streams_mutex_);
      for (size_t i = 0; i < owner_.size(); ++i) {
        if (owner_[i] && owner_[i]->stats().name == name) {
          id = int(i);
          stats = owner_[i]->shared_stats();
        }
      }
    }
    if (id < 0) throw RequestError(404, fmt::format("no stream is named '{}'", name));
    return snapshots_->jpeg(id, *stats, max_width, stats->closed ? 0ms : wait);
  }

  std::vector<RecentEvent> recent_events(const std::string& stream, const std::string& type, uint64_t since,
                                         size_t limit) const override {
    return recent_.list(stream, type, since, limit);
  }
  RecentEvent last_event(const std::string& stream) const override { return recent_.last(stream); }

  RunSummary run(const std::atomic<int>& stop) {
    RunSummary summary;
    summary.engine = classifier_->engine_name();
    if (cfg_.output.kind == config::OutputKind::None && cfg_.output.results.empty() && !cfg_.mqtt.enabled &&
        cfg_.events.rules.empty() && !cfg_.metrics.enabled && !cfg_.api.enabled) {
      log_->warn("classifying, but writing nothing: add --output FILE.mp4 or --set output.results=FILE.jsonl (or - for "
                 "stdout)");
    }
    const auto start = Clock::now();
    bool any_live = false, any_file = false;
    for (auto& s : streams_) (s->live() ? any_live : any_file) = true;
    Progress progress(any_file, cfg_.logging.progress_interval_s);
    std::vector<int> gpus;
    for (const auto& l : lanes_) gpus.push_back(l->classifier().cuda_device());
    PerfReport perf(cfg_.logging.perf_interval_s, any_live, gpus);
    try {
      start_all(streams_, kStartThreads);
      for (auto& l : lanes_) l->stats().ready = true;
      accepting_ = true;
      // One thread per engine takes its streams' batches; this one watches for the end, stops, and reports.
      for (auto& l : lanes_) l->start(hooks());
      for (;;) {
        if (!*stopping_ && (stop.load() > 0 || post_->wants_stop() || outputs_->wants_stop() || engine_failed_)) {
          *stopping_ = true;
          accepting_ = false;
          hub_->keep_open(false);  // every stream stops now: the run ends when they have
          summary.interrupted = stop.load() > 0;
          if (engine_failed_) hub_->shutdown();  // the one engine failed: nothing more can be classified
        }
        {
          std::lock_guard lock(streams_mutex_);
          if (added_live_) perf.live_joined();
          progress.update(streams_, start);
          perf.update(streams_);
        }
        std::unique_lock lock(lanes_mutex_);
        if (lanes_cv_.wait_for(lock, kIdleWait, [&] { return lanes_done_ == lanes_.size(); })) break;
      }
      join_lanes();
      if (engine_failed_) std::rethrow_exception(engine_error_);
    } catch (...) {
      try {
        *stopping_ = true;
        hub_->shutdown();  // the engines' threads end at once
        join_lanes();
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
  StreamEnvironment environment() {
    return {hub_, [gate = events_](StreamEvent e) { gate->submit(std::move(e)); },
            [placer = placer_](int stream, const DecodeLoad& load) { return placer->place(stream, load); }, stopping_,
            nullptr};
  }

  int output_credits() const { return std::max(kOutputCredits, 2 * classifier_->max_batch()); }

  // A slot for a stream joining the run: a new one while the run has room, else one a removed or ended stream
  // left (every stage has let go of it: its end went through and its thread finished). Throws RequestError.
  int free_slot(const std::string& name) {
    std::lock_guard lock(streams_mutex_);
    int reusable = -1;
    for (size_t i = 0; i < owner_.size(); ++i) {
      const Stream* s = owner_[i];
      if (!s) continue;
      if (s->stats().name == name && !s->stats().closed) {
        throw RequestError(409, fmt::format("a stream named '{}' is running{}", name,
                                            s->removed() ? " (it is being removed)" : ""));
      }
      if (reusable < 0 && s->stats().closed && s->finished()) reusable = int(i);
    }
    if (!discarded_.empty()) {  // a slot whose stream could not start
      const int id = discarded_.back();
      discarded_.pop_back();
      return id;
    }
    const size_t used = hub_->streams();
    if (used < capacity_) return int(used);
    if (reusable >= 0) return reusable;
    throw RequestError(503, fmt::format("the run has room for {} streams at once (api.max_streams)", capacity_));
  }

  EngineLane::Hooks hooks() {
    return {[this](int stream) { placer_->assignment().release(stream); },  // its decoding load is gone
            [this](EngineLane& lane, std::exception_ptr error, const Failure& why) { return engine_failed(lane, error, why); },
            [this] {
              std::lock_guard lock(lanes_mutex_);
              ++lanes_done_;
              lanes_cv_.notify_all();
            }};
  }

  // An engine failed (a GPU fault, out of memory). The only engine: the run ends with its error (false). One of
  // several: its streams fail with its error, it takes no new one, and the others go on (true).
  bool engine_failed(EngineLane& lane, std::exception_ptr error, const Failure& why) {
    const auto end_run = [&] {
      std::lock_guard lock(lanes_mutex_);
      engine_error_ = error;
      engine_failed_ = true;
    };
    if (lanes_.size() == 1) return end_run(), false;
    log_->error("{}; its streams end with it, the other engines go on", why.message);
    placer_->assignment().retire(lane.index());  // no stream is placed on it any more
    {
      std::lock_guard lock(streams_mutex_);
      for (size_t i = 0; i < owner_.size(); ++i) {  // (a stream whose results are all out lost nothing)
        const auto placed = placer_->assignment().placed(int(i));
        if (owner_[i] && placed && placed->lane == lane.index() && !owner_[i]->stats().closed) owner_[i]->abort(why);
      }
    }
    // The last engine: the run ends with its error, as with one engine.
    if (std::all_of(lanes_.begin(), lanes_.end(), [](const auto& l) { return l->failure().has_value(); })) end_run();
    return true;
  }

  void join_lanes() {
    for (auto& l : lanes_) l->join();
  }

  void shut_down(RunSummary& summary) {
    *stopping_ = true;
    accepting_ = false;
    std::lock_guard change(change_mutex_);  // a stream being added is in the lists below before they are read
    hub_->shutdown();
    events_->close();  // a stream left behind below must not reach the post stage once it is gone
    post_->finish();  // (events still open end here, and the sinks hear it)
    if (collector_) collector_->finish();
    outputs_->finish();
    if (event_stage_) event_stage_->finish();  // clips and snapshots written whole
    // Every source tears down at once, and many NVDEC decoders take a while to (120 took over 3 s on the H200): a
    // source is left behind only when no stream at all has finished for kStopGrace — stuck, not slow.
    auto deadline = Clock::now() + kStopGrace;
    size_t finished = 0;
    std::lock_guard lock(streams_mutex_);
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
        std::replace(owner_.begin(), owner_.end(), static_cast<Stream*>(s.get()), static_cast<Stream*>(nullptr));
        (void)s.release();  // its thread still uses it: never destroy it under that thread
        break;
      }
    }
  }

  // The per-stream rows, the engines, the totals and the exit status.
  void tally(RunSummary& summary, Clock::time_point start) const {
    for (auto& s : streams_) {
      if (!s) continue;
      auto row = summarize(*s, summary.interrupted, start);
      summary.frames += row.frames;
      summary.dropped += row.dropped + row.output_dropped;
      summary.streams.push_back(std::move(row));
    }
    for (const auto& info : engines()) {
      EngineSummary e{info.engine, info.gpu, info.gpu >= 0 ? fmt::format("{}, GPU {}", info.name, info.gpu) : info.name,
                      0, info.stats->frames, info.stats->batches, info.failure};
      for (const auto& row : summary.streams) e.streams += row.engine == info.engine && row.frames > 0 ? 1 : 0;
      summary.engines.push_back(std::move(e));
    }
    total_latency(summary);
    // Exit status: lost results or video first (they lose data the user asked for), then a failed engine, then failed
    // streams.
    std::vector<std::optional<Failure>> failures{post_->failure(), outputs_->failure()};
    for (const auto& l : lanes_) failures.push_back(l->failure());
    for (const auto& f : failures) {
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
    if (collector_) {
      summary.collected = fmt::format("{} frame(s) below {:.0f}% confidence kept for review in {}", collector_->saved(),
                                      cfg_.output.collect_below * 100, collector_->dir());
      if (const auto lost = collector_->lost()) {
        summary.problems.push_back(fmt::format("output.collect: {} frame(s) could not be kept", lost));
        if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
      }
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
  config::Config effective_;  // cfg_ with the model card's values (what /config shows)
  std::shared_ptr<spdlog::logger> log_ = vc::log::get("pipeline");
  std::vector<std::unique_ptr<inference::Classifier>> engines_;  // until their lanes are made
  inference::Classifier* classifier_ = nullptr;  // the first engine: labels, batch size, names
  const size_t capacity_;  // the most streams at once: the configured ones, or api.max_streams when streams may be added
  // What the streams hold jointly with the run (a stream left behind may outlive the run: stream.hpp).
  bool gpu_frames_ = false;  // an engine's CUDA context is shared with NVDEC: frames may stay in GPU memory
  std::shared_ptr<FrameHub> hub_;
  std::shared_ptr<StreamPlacer> placer_;
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<EventGate> events_;
  // Streams are added and removed from the service's threads while the run loop reads them.
  mutable std::mutex streams_mutex_;  // streams_, shared_stats_, owner_, refused_, discarded_
  std::mutex change_mutex_;           // one stream added at a time, and none while the run shuts down
  std::atomic<bool> accepting_{false};  // streams may be added (from the start of the run until it stops)
  std::atomic<bool> added_live_{false};
  std::vector<std::unique_ptr<Stream>> streams_;  // every stream of the run, in the order they joined
  std::vector<std::shared_ptr<const StreamStats>> shared_stats_;
  std::vector<Stream*> owner_;                    // slot (stream id) -> the stream that has it now
  std::vector<std::unique_ptr<Stream>> refused_;  // added, but could not start
  std::vector<int> discarded_;                    // their slots, free again
  std::unique_ptr<OutputStage> outputs_;
  EventStats event_stats_;
  std::unique_ptr<EventStage> event_stage_;  // before post_: the post stage uses it
  std::unique_ptr<Snapshots> snapshots_;     // (api.enabled)
  std::unique_ptr<Collector> collector_;     // (output.collect.dir)
  RecentEvents recent_;
  std::unique_ptr<PostStage> post_;
  std::vector<std::unique_ptr<EngineLane>> lanes_;  // after post_: their threads use it
  std::mutex lanes_mutex_;
  std::condition_variable lanes_cv_;
  size_t lanes_done_ = 0;              // engines whose threads have finished
  std::exception_ptr engine_error_;    // the only engine failed: the run ends with it (lanes_mutex_)
  std::atomic<bool> engine_failed_{false};
};

namespace {
std::vector<std::unique_ptr<inference::Classifier>> one(std::unique_ptr<inference::Classifier> classifier) {
  std::vector<std::unique_ptr<inference::Classifier>> engines;
  if (classifier) engines.push_back(std::move(classifier));
  return engines;
}
}  // namespace

Runner::Runner(const config::Config& config, std::unique_ptr<inference::Classifier> classifier)
    : impl_(std::make_unique<Impl>(config, one(std::move(classifier)))) {}
Runner::Runner(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> engines)
    : impl_(std::make_unique<Impl>(config, std::move(engines))) {}
Runner::~Runner() = default;
RunControl& Runner::control() { return *impl_; }
RunSummary Runner::run(const std::atomic<int>& stop) { return impl_->run(stop); }

}  // namespace vc::pipeline
