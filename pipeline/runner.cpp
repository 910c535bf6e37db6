#include "pipeline/runner.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/engine_lane.hpp"
#include "pipeline/event_gate.hpp"
#include "pipeline/live/live_hub.hpp"
#include "pipeline/model_swaps.hpp"
#include "pipeline/outputs/collector.hpp"
#include "pipeline/outputs/output_paths.hpp"
#include "pipeline/outputs/output_stage.hpp"
#include "pipeline/post_stage.hpp"
#include "pipeline/recent_events.hpp"
#include "pipeline/regions/region_table.hpp"
#include "pipeline/regions/run_models.hpp"
#include "pipeline/results/mqtt_sink.hpp"
#include "pipeline/results/results.hpp"
#include "pipeline/run_report.hpp"
#include "pipeline/snapshots.hpp"
#include "pipeline/stream_placer.hpp"
#include "pipeline/stream_table.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

// At the end of a run, how long sources may go on stopping with none of them finishing before one is left behind.
constexpr auto kStopGrace = 3s;
// Frames of a file with a video output that may be between the batcher and the output at once (>= two batches).
constexpr int kOutputCredits = 8;
// With nothing in flight, how long the loop waits for a first frame before it looks around (stop requests, progress).
constexpr auto kIdleWait = 200ms;
// Sources opened at once when the run starts.
constexpr size_t kStartThreads = 16;

std::vector<std::unique_ptr<inference::Classifier>> one(std::unique_ptr<inference::Classifier> classifier) {
  std::vector<std::unique_ptr<inference::Classifier>> engines;
  if (classifier) engines.push_back(std::move(classifier));
  return engines;
}

}  // namespace

class Runner::Impl final : public RunControl {
 public:
  Impl(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> engines)
      : cfg_(config),
        capacity_(cfg_.api.enabled ? std::max(cfg_.inputs.size(), size_t(cfg_.api.max_streams)) : cfg_.inputs.size()),
        events_(std::make_shared<EventGate>(capacity_)), table_(capacity_) {
    // Files that cannot be read are said at once, before the model loads and thousands of streams are set up.
    for (const auto& in : cfg_.inputs) {
      if (in.kind == config::InputKind::File) check_readable_file(in.path);
    }
    refuse_overwriting_inputs(cfg_);
    // Every model the streams use, an engine of each on every GPU (the given engines are the default model's).
    auto models = load_models(cfg_, std::move(engines));
    std::tie(models_, model_infos_) = std::tie(models.names, models.infos);
    engines_ = std::move(models.lanes);  // (lanes are made with the post stage, below)
    swaps_ = std::make_unique<ModelSwaps>(cfg_, models_, model_infos_);
    swaps_->prepare_tuning(engines_);  // (engines started untuned: their tuned selves are built from now on)
    const inference::Classifier* first = engines_.front().front().get();  // (a swap may replace it later)
    engine_name_ = first->engine_name();
    cuda_device_ = first->cuda_device();
    max_batch_ = first->max_batch();
    regions_ = std::make_shared<RegionTable>(models_, capacity_);
    for (size_t i = 0; i < cfg_.inputs.size(); ++i) regions_->set(int(i), cfg_.inputs[i]);
    effective_ = cfg_;
    try {  // what /config shows: the model file's card merged in, as the run has it
      const auto model = inference::model_settings(cfg_);
      effective_.model = model.model;
      effective_.model.weights = cfg_.model.weights;
    } catch (const Error&) {
    }
    const std::string model_name = first->architecture().size() > 40 ? "ResNet" : first->architecture();
    const OverlayMaker overlay{cfg_.overlay, cfg_.smoothing.window, first->engine_name(), model_name};
    // Frames may stay in GPU memory (NVDEC -> our kernel) for streams that have no video output to draw on: each
    // engine's decoders share its CUDA context.
    const bool draw = cfg_.output.kind != config::OutputKind::None;
    std::vector<int> devices;
    for (auto& engine : engines_) devices.push_back(engine.front()->cuda_device());
    auto contexts = decoder_contexts(devices, draw);
    for (const auto& c : contexts) gpu_frames_ = gpu_frames_ || c != nullptr;
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
      auto stream = std::make_unique<Stream>(int(i), cfg_.inputs[i], gpu_frames_, environment());
      stats.push_back(&stream->stats());
      names.push_back(stream->stats().name);
      table_.add(std::move(stream));
    }
    std::vector<bool> may_drop;
    for (const auto& p : policies) may_drop.push_back(p.drop_oldest);
    outputs_ = std::make_unique<OutputStage>(cfg_, stats, may_drop, first->engine_name(), model_name,
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
    if (cfg_.api.enabled) sinks.push_back(live_.results_sink());
    if (!cfg_.events.rules.empty()) {
      const auto& whole_labels = models_.front() == "default" ? model_infos_.front().labels : std::vector<std::string>{};
      event_stage_ = std::make_unique<EventStage>(cfg_, stats, whole_labels, overlay, event_stats_, capacity_,
                                                  region_labels(cfg_, {models_, model_infos_, {}}));
    }
    {
      std::lock_guard lock(table_.mutex());
      for (auto& stream : table_.list()) take_packets(*stream);
    }
    post_ = std::make_unique<PostStage>(cfg_, model_infos_, stats, std::move(sinks), *outputs_, event_stage_.get(), capacity_);
    if (cfg_.api.enabled) {
      snapshots_ = std::make_unique<Snapshots>(
          capacity_, std::chrono::milliseconds(int64_t(cfg_.api.snapshot_interval_s * 1000)), overlay);
      post_->set_tap([s = snapshots_.get()](const auto& frame, const FrameResult& r) { s->take(frame, r); },
                     snapshots_->wanted());
    }
    post_->set_event_tap([this](const StreamEvent& e) { recent_.add(e); });
    post_->set_regions(regions_);
    const auto fill = std::chrono::microseconds(int64_t(cfg_.inference.batch_timeout_ms * 1000));
    for (auto& engine : engines_) {
      lanes_.push_back(std::make_unique<EngineLane>(int(lanes_.size()), std::move(engine), hub_, *post_, fill, regions_,
                                                    model_infos_));
    }
    engines_.clear();
    if (!cfg_.output.collect_dir.empty()) {
      collector_ = std::make_unique<Collector>(cfg_.output, capacity_);
      post_->set_collector(collector_.get());
    }
    events_->open(post_.get());  // events come only from running streams, and none runs yet
  }

  // RunControl.
  std::vector<std::shared_ptr<const StreamStats>> streams() const override { return table_.stats(); }
  const EngineStats& engine() const override { return lanes_.front()->stats(); }
  std::vector<EngineInfo> engines() const override {
    std::vector<EngineInfo> out;
    for (const auto& l : lanes_) out.push_back(l->info());
    return out;
  }
  std::vector<SinkStatus> sinks() const override { return post_->sink_status(); }
  const EventStats* events() const override { return event_stage_ ? &event_stats_ : nullptr; }
  std::string engine_name() const override { return engine_name_; }
  int cuda_device() const override { return cuda_device_; }
  const config::Config& config() const override { return effective_; }
  std::vector<config::Input> inputs() const override { return table_.inputs(); }

  void add_stream(const config::Input& input, std::shared_ptr<const OpenedInput> opened) override {
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
    (void)regions_->plan(input);  // a region whose model this run has not loaded is refused before anything is claimed
    sweep_removed();  // (those finished since: let go of here, not by claim(), which does not know removing_)
    const int id = table_.claim(
        input.name, hub_->streams(),
        [this](const Stream& s) {
          return finished_everywhere(s) && std::find(removing_.begin(), removing_.end(), &s) == removing_.end();
        },
        [this](const Stream& s) { return summarize(s, false, start_); },
        [this](int slot, const std::string& name) { released(slot, name); });
    const bool reused = id < int(hub_->streams());
    placer_->assignment().release(id);  // (a placement its last stream made late, as it ended)
    const auto policy = queue_policy(input, is_live_input(input));
    // Its frames wait in the batcher, held, until every stage knows the stream; its events wait at the gate.
    if (reused) hub_->reopen(id, policy, true);
    else if (hub_->add_stream(policy, true) != id) throw InternalError("stream slots out of step with the batcher");
    events_->hold(id);
    regions_->set(id, input);  // (checked before its slot was claimed: it does not throw)
    auto stream = std::make_unique<Stream>(id, input, gpu_frames_, environment(), std::move(opened));
    StreamStats& stats = stream->stats();
    try {
      if (event_stage_) event_stage_->add_stream(id, stats);
      take_packets(*stream);
      stream->start();
    } catch (...) {
      hub_->discard(id);
      events_->forget(id);
      placer_->assignment().release(id);
      table_.refused(std::move(stream));  // its slot serves the next stream
      throw;
    }
    try {
      outputs_->add_stream(id, stats, policy.drop_oldest);
    } catch (...) {  // (the run is ending): the stream stops again, and is joined with the others
      stream->remove();
      hub_->discard(id);
      events_->forget(id);
      placer_->assignment().release(id);
      table_.add(std::move(stream));
      throw;
    }
    if (!policy.drop_oldest && outputs_->draws(id)) hub_->set_credits(id, output_credits());
    if (snapshots_) snapshots_->reset(id);
    recent_.forget_last(input.name);
    post_->add_stream(id, stats);
    events_->admit(id);
    table_.add(std::move(stream));
    hub_->release(id);
    added_live_ = added_live_ || stats.live;
    log_->info("stream {} added ({})", input.name, stats.source);
  }

  // A running stream is stopped and let go of once every stage is done with it (or later, by the run's loop); one
  // that has ended or failed is let go of at once.
  bool remove_stream(const std::string& name, std::chrono::milliseconds wait) override {
    std::lock_guard change(change_mutex_);
    const auto found = table_.find(name);
    const bool removing = found && std::find(removing_.begin(), removing_.end(), found->stream) != removing_.end();
    if (!found || removing) throw RequestError(404, fmt::format("no stream is named '{}'", name));
    Stream* stream = found->stream;
    if (!stream->stats().closed) {
      stream->remove();  // it ends as at the end of its input: what is queued goes through, then its end
      log_->info("stream {}: removing", name);
    }
    const auto deadline = Clock::now() + wait;
    while (!finished_everywhere(*stream)) {
      if (Clock::now() >= deadline || *stopping_) {
        removing_.push_back(stream);  // the run's loop lets go of it when it has finished
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    let_go(stream);
    return true;
  }

  std::optional<Snapshot> snapshot(const std::string& name, int max_width, std::chrono::milliseconds wait, bool clean,
                                   const config::PixelBox* crop) override {
    if (!snapshots_) throw RequestError(404, "snapshots are made for the service's API only (api.enabled)");
    const auto found = table_.find(name);
    if (!found) throw RequestError(404, fmt::format("no stream is named '{}'", name));
    if (found->stats->closed) wait = 0ms;
    return crop ? snapshots_->crop(found->slot, *found->stats, *crop, wait)
                : snapshots_->jpeg(found->slot, *found->stats, max_width, wait, clean);
  }

  std::shared_ptr<void> watch_video(const std::string& name, LiveViewer viewer, uint64_t& session) override {
    return live_.watch_video(name, std::move(viewer), session);
  }
  std::shared_ptr<void> watch_results(const std::string& name, std::function<bool(const std::string&)> send,
                                      std::function<void()> end) override {
    return live_.watch_results(name, std::move(send), std::move(end));
  }

  std::vector<RecentEvent> recent_events(const std::string& stream, const std::string& type, uint64_t since,
                                         size_t limit) const override {
    return recent_.list(stream, type, since, limit);
  }
  RecentEvent last_event(const std::string& stream) const override { return recent_.last(stream); }

  Regions regions(const std::string& name) const override {
    const auto found = table_.find(name);
    if (!found || found->stats->closed) throw RequestError(404, fmt::format("no running stream is named '{}'", name));
    std::lock_guard lock(table_.mutex());
    return {found->stream->input(), found->stats->shown_width.load(), found->stats->shown_height.load()};
  }

  void set_regions(const std::string& name, const config::Input& with) override {
    std::lock_guard change(change_mutex_);
    const auto found = table_.find(name);
    if (!found || found->stats->closed || std::count(removing_.begin(), removing_.end(), found->stream)) {
      throw RequestError(404, fmt::format("no running stream is named '{}'", name));
    }
    regions_->check(cfg_, with, found->stats->shown_width, found->stats->shown_height);
    regions_->set(found->slot, with);
    std::lock_guard lock(table_.mutex());
    found->stream->set_regions(with.regions, with.whole);
    log_->info("stream {}: {} region(s){}", name, with.regions.size(), with.whole ? " and the whole picture" : "");
  }

  std::vector<ModelView> models() const override { return swaps_->views(); }

  ModelView deploy_model(const std::string& name, const std::string& weights,
                         std::shared_ptr<const OpenedInput> opened) override {
    const auto lanes = switchable_lanes();
    return swaps_->deploy(name, weights, opened ? opened->proc_path() : weights, lanes, *stopping_);
  }

  ModelView roll_back_model(const std::string& name) override {
    const auto lanes = switchable_lanes();
    return swaps_->roll_back(name, lanes, *stopping_);
  }

  RunSummary run(const std::atomic<int>& stop) {
    RunSummary summary;
    summary.engine = engine_name_;
    warn_if_writing_nothing(cfg_);
    const auto start = start_ = Clock::now();
    bool any_live = false, any_file = false;
    for (auto& s : table_.list()) (s->live() ? any_live : any_file) = true;
    Progress progress(any_file, cfg_.logging.progress_interval_s);
    std::vector<int> gpus;
    for (const auto& l : lanes_) gpus.push_back(l->cuda_device());
    PerfReport perf(cfg_.logging.perf_interval_s, any_live, gpus);
    try {
      start_all(table_.list(), kStartThreads);
      for (auto& l : lanes_) l->stats().ready = true;
      accepting_ = true;
      // One thread per engine takes its streams' batches; this one watches for the end, stops, and reports.
      for (auto& l : lanes_) l->start(hooks());
      swaps_->start_tuning(lanes_);
      for (;;) {
        if (!*stopping_ && (stop.load() > 0 || post_->wants_stop() || outputs_->wants_stop() || engine_failed_)) {
          *stopping_ = true;
          accepting_ = false;
          hub_->keep_open(false);  // every stream stops now: the run ends when they have
          summary.interrupted = stop.load() > 0;
          // Ctrl-C within about a second: a batch that takes seconds (a CPU engine) is cut short.
          if (summary.interrupted) {
            for (auto& l : lanes_) l->interrupt();
          }
          if (engine_failed_) hub_->shutdown();  // the one engine failed: nothing more can be classified
        }
        {
          std::lock_guard lock(table_.mutex());
          if (added_live_) perf.live_joined();
          progress.update(table_.list(), start);
          perf.update(table_.list());
        }
        let_go_removed();
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
    summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    tally(summary, start);
    return summary;
  }

 private:
  StreamEnvironment environment() {
    return {hub_, [gate = events_](StreamEvent e) { gate->submit(std::move(e)); },
            [placer = placer_](int stream, const DecodeLoad& load) { return placer->place(stream, load); }, stopping_,
            nullptr, {}};
  }

  // Where a stream's packets go: its event clips, its live viewers.
  void take_packets(Stream& s) {
    PacketSink clips = event_stage_ ? event_stage_->packet_sink(s.id()) : PacketSink{};
    if (cfg_.api.enabled) live_.add_stream(s, std::move(clips));
    else if (clips) s.set_packet_sink(std::move(clips));
  }

  // The lanes a model switch goes to: every one, while the run takes requests and no engine has failed.
  std::vector<EngineLane*> switchable_lanes() const {
    if (!accepting_) throw RequestError(503, *stopping_ ? "the run is stopping" : "the run is starting");
    std::vector<EngineLane*> lanes;
    for (const auto& l : lanes_) {
      if (const auto failure = l->failure()) {
        throw RequestError(409, fmt::format("{}: a model cannot be switched while an engine has failed", failure->message));
      }
      lanes.push_back(l.get());
    }
    return lanes;
  }

  int output_credits() const { return std::max(kOutputCredits, 2 * max_batch_); }

  // Whether every stage is done with a stream that has ended: its last result and end are out, its video is
  // finalized, its thread has finished.
  bool finished_everywhere(const Stream& s) const {
    return s.stats().closed && outputs_->stream_finished(s.id()) && s.finished();
  }

  // Lets go of a stream every stage is done with (change_mutex_ held): its row is kept, its output worker joined, its
  // last event forgotten.
  void let_go(Stream* stream) {
    const int id = stream->id();
    const std::string name = stream->stats().name;
    table_.let_go(stream, summarize(*stream, false, start_));
    released(id, name);
  }

  // What the other stages hold of a stream let go of.
  void released(int slot, const std::string& name) {
    outputs_->release_stream(slot);
    recent_.forget_last(name);
  }

  // The streams whose removal answered before they had finished: let go of once they have (change_mutex_ held).
  void sweep_removed() {
    std::erase_if(removing_, [&](Stream* s) {
      if (!finished_everywhere(*s)) return false;
      let_go(s);
      return true;
    });
  }

  // The same from the run's loop, when no change is being made.
  void let_go_removed() {
    std::unique_lock change(change_mutex_, std::try_to_lock);  // (a change in progress: the next round)
    if (change.owns_lock()) sweep_removed();
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
      std::lock_guard lock(table_.mutex());
      for (auto& s : table_.list()) {  // (a stream whose results are all out lost nothing)
        const auto placed = placer_->assignment().placed(s->id());
        if (placed && placed->lane == lane.index() && !s->stats().closed) s->abort(why);
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
    swaps_->finish_tuning();  // (before the lanes go: it may be switching them)
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
    std::vector<Stream*> streams;
    {
      std::lock_guard lock(table_.mutex());
      for (auto& s : table_.list()) streams.push_back(s.get());
    }
    for (Stream* s : streams) {
      while (!s->join_for(100ms)) {
        const auto now_finished = size_t(std::count_if(streams.begin(), streams.end(), [](const Stream* x) { return x->finished(); }));
        if (now_finished > finished) {
          finished = now_finished;
          deadline = Clock::now() + kStopGrace;
        }
        if (Clock::now() < deadline) continue;
        log_->warn("stream {}: its source does not stop; leaving it behind", s->stats().name);
        summary.abandoned.push_back(s->stats().name);
        table_.abandon(s);  // its thread still uses it: never destroyed under that thread
        break;
      }
    }
  }

  // The per-stream rows, the engines, the totals and the exit status.
  void tally(RunSummary& summary, Clock::time_point start) const {
    // The streams let go of first (a service's removed ones, in the order they went), then those still here.
    const auto gone = table_.gone();
    summary.earlier_streams = gone.earlier;
    summary.frames += gone.earlier_frames;
    summary.dropped += gone.earlier_dropped;
    for (const auto& name : gone.earlier_failed) summary.failed_streams.push_back(name);
    if (gone.earlier_failure && summary.code == ExitCode::kOk) summary.code = gone.earlier_failure->code;
    std::vector<StreamSummary> rows(gone.rows.begin(), gone.rows.end());
    {
      std::lock_guard lock(table_.mutex());
      for (const auto& s : table_.list()) rows.push_back(summarize(*s, summary.interrupted, start));
    }
    for (auto& row : rows) {
      summary.frames += row.frames;
      summary.dropped += row.dropped + row.output_dropped;
      summary.streams.push_back(std::move(row));
    }
    for (const auto& info : engines()) {
      summary.unclassified += info.stats->unclassified;
      EngineSummary e{info.engine, info.gpu, info.gpu >= 0 ? fmt::format("{}, GPU {}", info.name, info.gpu) : info.name,
                      0, info.stats->frames, info.stats->batches, info.failure};
      for (const auto& row : summary.streams) e.streams += row.engine == info.engine && row.frames > 0 ? 1 : 0;
      summary.engines.push_back(std::move(e));
    }
    total_latency(summary);
    std::vector<std::optional<Failure>> failures{post_->failure(), outputs_->failure()};
    for (const auto& l : lanes_) failures.push_back(l->failure());
    settle_exit_status(summary, failures, kStopGrace);
    report_losses(summary, event_stage_ ? &event_stats_ : nullptr, cfg_.events.dir, collector_.get(),
                  cfg_.output.collect_below, post_->sink_status());
  }

  const config::Config cfg_;
  config::Config effective_;  // cfg_ with the model card's values (what /config shows)
  std::shared_ptr<spdlog::logger> log_ = vc::log::get("pipeline");
  std::vector<std::string> models_;     // the run's models (config::models_in_use), "default" first when used
  std::vector<ModelInfo> model_infos_;   // by model
  std::vector<std::vector<std::unique_ptr<inference::Classifier>>> engines_;  // per lane, per model: until lanes are made
  std::string engine_name_;  // the first engine's (a swap keeps the kind and the GPU)
  int cuda_device_ = -1;
  int max_batch_ = 1;
  std::unique_ptr<ModelSwaps> swaps_;     // the models' weights over time (deploys, rollbacks)
  std::shared_ptr<RegionTable> regions_;  // what each stream classifies
  const size_t capacity_;  // the most streams at once: the configured ones, or api.max_streams when streams may be added
  // What the streams hold jointly with the run (a stream left behind may outlive the run: stream.hpp).
  bool gpu_frames_ = false;  // an engine's CUDA context is shared with NVDEC: frames may stay in GPU memory
  std::shared_ptr<FrameHub> hub_;
  std::shared_ptr<StreamPlacer> placer_;
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<EventGate> events_;
  // Streams are added and removed from the service's threads while the run loop reads them.
  StreamTable table_;
  std::mutex change_mutex_;           // one stream added or removed at a time, and none while the run shuts down
  std::vector<Stream*> removing_;     // (change_mutex_) removed, answered, not yet finished everywhere
  Clock::time_point start_ = Clock::now();  // the run's start
  std::atomic<bool> accepting_{false};  // streams may be added (from the start of the run until it stops)
  std::atomic<bool> added_live_{false};
  std::unique_ptr<OutputStage> outputs_;
  EventStats event_stats_;
  LiveHub live_;                             // before post_: one of its sinks is the hub's (api.enabled)
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

Runner::Runner(const config::Config& config, std::unique_ptr<inference::Classifier> classifier)
    : impl_(std::make_unique<Impl>(config, one(std::move(classifier)))) {}
Runner::Runner(const config::Config& config, std::vector<std::unique_ptr<inference::Classifier>> engines)
    : impl_(std::make_unique<Impl>(config, std::move(engines))) {}
Runner::~Runner() = default;
RunControl& Runner::control() { return *impl_; }
RunSummary Runner::run(const std::atomic<int>& stop) { return impl_->run(stop); }

}  // namespace vc::pipeline
