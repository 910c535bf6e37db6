#include "service/metrics.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/version.hpp"
#include "inference/cuda/gpu_info.hpp"

namespace vc::service {

using pipeline::Clock;
using pipeline::EngineStats;
using pipeline::LatencyHistogram;
using pipeline::StreamState;
using pipeline::StreamStats;
using pipeline::from_steady_ns;

namespace {

// Label values are quoted; backslash, quote and newline escaped (Prometheus text format).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Text {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
  // A family of one unlabelled sample.
  void single(const char* name, const char* type, const char* help, double value) {
    family(name, type, help);
    sample(name, "", value);
  }
  // A histogram in seconds from a latency histogram in milliseconds.
  void histogram(const char* name, const std::string& labels, const LatencyHistogram& h, const std::vector<double>& bounds_ms) {
    const std::string sep = labels.empty() ? "" : ",";
    for (double b : bounds_ms) sample(fmt::format("{}_bucket", name), fmt::format("{}{}le=\"{}\"", labels, sep, b / 1000), double(h.count_at_most(b)));
    sample(fmt::format("{}_bucket", name), fmt::format("{}{}le=\"+Inf\"", labels, sep), double(h.count()));
    sample(fmt::format("{}_sum", name), labels, h.sum_ms() / 1000);
    sample(fmt::format("{}_count", name), labels, double(h.count()));
  }
  std::string str() && { return std::move(out_); }

 private:
  std::string out_;
};

const std::vector<double> kLatencyBoundsMs = {1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};

double age_seconds(int64_t steady) {
  return steady > 0 ? std::chrono::duration<double>(Clock::now() - from_steady_ns(steady)).count() : -1;
}

}  // namespace

std::string render_metrics(const pipeline::RunControl& run) {
  const auto streams = run.streams();
  Text t;
  t.family("vc_info", "gauge", "video-classifier build and engine");
  t.sample("vc_info", fmt::format("version=\"{}\",revision=\"{}\",engine=\"{}\"", kVersion, kGitRevision, label(run.engine_name())), 1);

  const auto per_stream = [&](const char* name, const char* type, const char* help, auto value) {
    t.family(name, type, help);
    for (const auto& s : streams) t.sample(name, fmt::format("stream=\"{}\"", label(s->name)), double(value(*s)));
  };
  per_stream("vc_stream_frames_total", "counter", "frames classified", [](const StreamStats& s) { return s.classified.load(); });
  per_stream("vc_stream_received_total", "counter",
             "frames received from the source, before any was dropped (received = classified + dropped + waiting)",
             [](const StreamStats& s) { return s.delivered.load(); });
  t.family("vc_stream_dropped_total", "counter", "frames dropped: stale before inference (queue) or not drawn (output)");
  for (const auto& s : streams) {
    t.sample("vc_stream_dropped_total", fmt::format("stream=\"{}\",stage=\"queue\"", label(s->name)), double(s->queue_dropped.load()));
    t.sample("vc_stream_dropped_total", fmt::format("stream=\"{}\",stage=\"output\"", label(s->name)), double(s->output_dropped.load()));
  }
  per_stream("vc_stream_fps", "gauge", "frames classified per second over the last seconds",
             [](const StreamStats& s) { return s.rate.per_second(Clock::now()); });
  per_stream("vc_stream_reconnects_total", "counter", "source restarts after a failure or stall",
             [](const StreamStats& s) { return s.reconnects.load(); });
  per_stream("vc_stream_non_finite_total", "counter", "frames whose logits held NaN/Inf", [](const StreamStats& s) { return s.non_finite.load(); });
  per_stream("vc_stream_up", "gauge", "1 while the stream runs, 0 while it reconnects, has ended or failed",
             [](const StreamStats& s) { return s.state == StreamState::Running ? 1 : 0; });
  t.family("vc_region_results_total", "counter", "results of a stream's region (every N frames), by its model");
  for (const auto& s : streams) {
    for (const auto& r : s->region_stats()) {
      t.sample("vc_region_results_total", fmt::format("stream=\"{}\",region=\"{}\",model=\"{}\"", label(s->name),
                                                      label(r.region), label(r.model)), double(r.classified));
    }
  }
  t.family("vc_region_score", "gauge", "the confidence of a region's latest top-1, with that label");
  for (const auto& s : streams) {
    for (const auto& r : s->region_stats()) {
      t.sample("vc_region_score", fmt::format("stream=\"{}\",region=\"{}\",label=\"{}\"", label(s->name),
                                              label(r.region), label(r.current.label)), double(r.current.score));
    }
  }
  per_stream("vc_stream_last_frame_age_seconds", "gauge", "seconds since the stream's last frame (-1: none yet)",
             [](const StreamStats& s) { return age_seconds(s.last_frame_ns); });
  t.family("vc_stream_decoder_info", "gauge",
           "the decoder a stream uses; gpu_frames: frames stay in GPU memory; engine and gpu: where it is decoded and "
           "classified (gpu -1: the CPU engine, or not placed yet)");
  for (const auto& s : streams) {
    t.sample("vc_stream_decoder_info", fmt::format("stream=\"{}\",decoder=\"{}\",gpu_frames=\"{}\",engine=\"{}\",gpu=\"{}\"",
                                                   label(s->name), label(s->decoder_name()), s->gpu_frames ? "true" : "false",
                                                   s->engine.load(), s->gpu.load()), 1);
  }
  t.family("vc_stream_latency_seconds", "histogram", "capture to result written");
  for (const auto& s : streams) t.histogram("vc_stream_latency_seconds", fmt::format("stream=\"{}\"", label(s->name)), s->latency, kLatencyBoundsMs);
  t.family("vc_stream_stage_seconds_total", "counter", "time frames spent in each stage, summed");
  for (const auto& s : streams) {
    for (const auto& [stage, h] : {std::pair<const char*, const LatencyHistogram*>{"queue", &s->queue_wait}, {"inference", &s->inference},
                                   {"post", &s->post}, {"output", &s->output}}) {
      t.sample("vc_stream_stage_seconds_total", fmt::format("stream=\"{}\",stage=\"{}\"", label(s->name), stage), h->sum_ms() / 1000);
    }
  }
  {
    // Per engine (one per GPU with inference.gpus): engine="0", gpu="0" (-1: the CPU engine).
    const auto engines = run.engines();
    const auto labels = [](const pipeline::EngineInfo& e) { return fmt::format("engine=\"{}\",gpu=\"{}\"", e.engine, e.gpu); };
    t.family("vc_batches_total", "counter", "inference batches");
    for (const auto& e : engines) t.sample("vc_batches_total", labels(e), double(e.stats->batches.load()));
    t.family("vc_batch_size", "histogram", "frames per inference batch");
    for (const auto& e : engines) {
      int64_t cumulative = 0;
      for (int b = 0; b < EngineStats::kSizeBuckets; ++b) {
        cumulative += e.stats->batch_sizes[size_t(b)];
        t.sample("vc_batch_size_bucket", fmt::format("{},le=\"{}\"", labels(e), 1 << b), double(cumulative));
      }
      t.sample("vc_batch_size_bucket", labels(e) + ",le=\"+Inf\"", double(e.stats->batches.load()));
      t.sample("vc_batch_size_sum", labels(e), double(e.stats->frames.load()));
      t.sample("vc_batch_size_count", labels(e), double(e.stats->batches.load()));
    }
    t.family("vc_engine_batch_seconds", "histogram", "a batch from submission to logits (preprocess + inference, two in flight)");
    for (const auto& e : engines) t.histogram("vc_engine_batch_seconds", labels(e), e.stats->batch_ms, kLatencyBoundsMs);
    t.family("vc_engine_up", "gauge", "1 while the engine works, 0 once it failed (its streams failed with it)");
    for (const auto& e : engines) t.sample("vc_engine_up", labels(e), e.failure.empty() ? 1 : 0);
    t.single("vc_ready", "gauge", "1 once the engine is built and every stream started", run.engine().ready ? 1 : 0);
    const auto models = run.models();
    t.family("vc_model_tuned", "gauge",
             "1 once the model's engines run their tuned choices (0 while engines started untuned run, "
             "inference.tune_in_background)");
    for (const auto& m : models) t.sample("vc_model_tuned", fmt::format("model=\"{}\"", label(m.name)), m.tuned ? 1 : 0);
    t.family("vc_model_tuned_after_seconds", "gauge", "when the tuned engines took over, after the run was set up (0: never needed)");
    for (const auto& m : models) {
      t.sample("vc_model_tuned_after_seconds", fmt::format("model=\"{}\"", label(m.name)), m.tuned_after_s);
    }
    std::vector<int> gpus;  // each GPU once (two engines may share one)
    for (const auto& e : engines) {
      if (e.gpu >= 0 && std::find(gpus.begin(), gpus.end(), e.gpu) == gpus.end()) gpus.push_back(e.gpu);
    }
    std::vector<std::tuple<int, size_t, size_t>> memory;
    for (int gpu : gpus) {
      size_t used = 0, total = 0;
      if (inference::gpu_memory(gpu, used, total)) memory.emplace_back(gpu, used, total);
    }
    if (!memory.empty()) {
      t.family("vc_gpu_memory_used_bytes", "gauge", "GPU memory in use (all processes)");
      for (const auto& [gpu, used, total] : memory) t.sample("vc_gpu_memory_used_bytes", fmt::format("gpu=\"{}\"", gpu), double(used));
      t.family("vc_gpu_memory_total_bytes", "gauge", "GPU memory");
      for (const auto& [gpu, used, total] : memory) t.sample("vc_gpu_memory_total_bytes", fmt::format("gpu=\"{}\"", gpu), double(total));
    }
  }
  {
    const auto sinks = run.sinks();
    t.family("vc_sink_dropped_total", "counter", "messages a result sink could not deliver");
    for (const auto& s : sinks) t.sample("vc_sink_dropped_total", fmt::format("sink=\"{}\"", label(s.name)), double(s.dropped));
    t.family("vc_sink_connected", "gauge", "1 while a result sink can deliver (an MQTT broker connection is up)");
    for (const auto& s : sinks) t.sample("vc_sink_connected", fmt::format("sink=\"{}\"", label(s.name)), s.healthy ? 1 : 0);
  }
  if (const auto* ev = run.events()) {
    per_stream("vc_stream_events_total", "counter", "rule events opened on the stream",
               [](const StreamStats& s) { return s.events.load(); });
    t.family("vc_events_total", "counter", "rule event messages, by type");
    for (const auto& [type, n] : {std::pair<const char*, int64_t>{"new", ev->opened.load()}, {"update", ev->updated.load()},
                                  {"end", ev->ended.load()}}) {
      t.sample("vc_events_total", fmt::format("type=\"{}\"", type), double(n));
    }
    t.single("vc_event_clips_total", "counter", "event clips written whole", double(ev->clips.load()));
    t.single("vc_event_clip_bytes_total", "counter", "bytes of the event clips written", double(ev->clip_bytes.load()));
    t.single("vc_event_snapshots_total", "counter", "event snapshots written", double(ev->snapshots.load()));
    t.single("vc_event_failures_total", "counter", "event files that could not be written (a full disk)",
             double(ev->failures.load()));
    t.single("vc_event_dropped_total", "counter", "event file jobs dropped: the writer was too far behind",
             double(ev->dropped.load()));
    t.single("vc_event_buffer_bytes", "gauge", "compressed video held for clips, every stream together",
             double(ev->buffer_bytes.load()));
  }
  return std::move(t).str();
}

std::string render_live_metrics(const std::map<std::string, LiveViews::Counts>& live) {
  Text t;
  const auto each = [&](const char* name, const char* type, const char* help, auto value) {
    t.family(name, type, help);
    for (const auto& [stream, c] : live) t.sample(name, fmt::format("stream=\"{}\"", label(stream)), double(value(c)));
  };
  each("vc_live_viewers", "gauge", "viewers of the stream's live video (live.mp4) now",
       [](const LiveViews::Counts& c) { return c.viewers; });
  each("vc_live_result_streams", "gauge", "result streams of the stream open now",
       [](const LiveViews::Counts& c) { return c.result_streams; });
  each("vc_live_sent_bytes_total", "counter", "bytes of live video and results queued for the stream's viewers",
       [](const LiveViews::Counts& c) { return c.bytes; });
  each("vc_live_skipped_total", "counter", "pieces the stream's slow viewers skipped (a video viewer: up to a keyframe)",
       [](const LiveViews::Counts& c) { return c.skipped; });
  return std::move(t).str();
}

std::pair<bool, std::string> render_health(const pipeline::RunControl& run, double stall_s, Clock::time_point started) {
  bool healthy = true;
  nlohmann::json rows = nlohmann::json::array();
  const double since_start = std::chrono::duration<double>(Clock::now() - started).count();
  for (const auto& s : run.streams()) {
    const auto state = s->state.load();
    const double age = age_seconds(s->last_frame_ns);
    // Results: since the last one (or, before the first, since the first frame), while frames keep coming.
    const double result_age = s->last_result_ns > 0 ? age_seconds(s->last_result_ns) : age_seconds(s->first_frame_ns);
    const bool waiting_for_results = s->last_frame_ns > s->last_result_ns;
    bool ok = true;
    std::string why;
    if (state == StreamState::Failed) {
      ok = false;
      why = "failed";
    }
    if (state == StreamState::Starting || state == StreamState::Running || state == StreamState::Reconnecting) {
      // No frame yet: allowed stall_s after the stream's start (one added later: its own start, not the server's).
      const double since = s->started_ns > 0 ? age_seconds(s->started_ns) : since_start;
      if (age >= 0 ? age > stall_s : since > stall_s) {
        ok = false;
        why = "no frame from the source";
      } else if (waiting_for_results && result_age > stall_s) {  // the engine, post-processing or an output is stuck
        ok = false;
        why = "frames arrive but no result is produced";
      }
    }
    healthy &= ok;
    nlohmann::json row = {{"stream", s->name}, {"state", name(state)}, {"last_frame_age_s", age},
                          {"last_result_age_s", s->last_result_ns > 0 ? age_seconds(s->last_result_ns) : -1.0},
                          {"ok", ok}};
    if (!why.empty()) row["problem"] = why;
    rows.push_back(std::move(row));
  }
  nlohmann::json body = {{"status", healthy ? "ok" : "unhealthy"}, {"stall_s", stall_s}, {"streams", rows}};
  return {healthy, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

}  // namespace vc::service
