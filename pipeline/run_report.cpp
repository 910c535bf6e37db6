#include "pipeline/run_report.hpp"

#include "pipeline/outputs/collector.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "config/logging.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::pipeline {
namespace {

using namespace std::chrono_literals;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

Progress::Progress(bool enabled, double log_interval_s)
    : terminal_(isatty(STDERR_FILENO)), enabled_(enabled && (terminal_ || log_interval_s > 0)),
      interval_(terminal_ ? Clock::duration(500ms)
                          : std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(log_interval_s))) {}

void Progress::update(const std::vector<std::unique_ptr<Stream>>& streams, Clock::time_point start) {
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

void Progress::done() {
  if (shown_) fmt::print(stderr, "\n");
  shown_ = false;
}

void PerfReport::update(const std::vector<std::unique_ptr<Stream>>& streams) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (last_ == Clock::time_point{}) {
    last_ = now;
    return;
  }
  const double dt = seconds_between(last_, now);
  if (dt < interval_) return;
  std::map<const StreamStats*, std::pair<int64_t, int64_t>> seen;  // (streams let go of are forgotten)
  std::string line;
  double total = 0;
  std::vector<double> per_engine(engine_gpus_.size(), 0.0);
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto& st = streams[i]->stats();
    if (st.state == StreamState::Ended) continue;
    const int64_t frames = st.classified, drops = st.queue_dropped + st.output_dropped;
    auto before = previous_.count(&st) ? previous_[&st] : std::pair<int64_t, int64_t>{0, 0};
    if (before.first > frames || before.second > drops) before = {0, 0};  // (a new stream at a let-go one's address)
    const double fps = double(frames - before.first) / dt;
    total += fps;
    if (const auto e = size_t(st.engine.load()); e < per_engine.size()) per_engine[e] += fps;
    line += fmt::format("{}{} {:.1f} fps, {} dropped, p99 {:.0f} ms{}", line.empty() ? "" : " | ", st.name, fps,
                        drops - before.second, st.latency.percentile_ms(0.99),  // (drops and fps: this interval's)
                        st.state == StreamState::Reconnecting ? " (reconnecting)"
                        : st.state == StreamState::Failed    ? " (failed)" : "");
    seen[&st] = {frames, drops};
  }
  previous_ = std::move(seen);
  std::string engines;
  for (size_t e = 0; per_engine.size() > 1 && e < per_engine.size(); ++e) {
    engines += fmt::format("{}engine {}{} {:.1f} fps", engines.empty() ? " (" : ", ", e,
                           engine_gpus_[e] >= 0 ? fmt::format(" GPU {}", engine_gpus_[e]) : "", per_engine[e]);
  }
  if (!engines.empty()) engines += ")";
  if (!line.empty()) {
    vc::log::get("perf")->info("last {:.0f} s: {} | total {:.1f} fps{} (the summary's drops count the whole run)", dt, line,
                               total, engines);
  }
  last_ = now;
}

StreamSummary summarize(const Stream& s, bool interrupted, Clock::time_point start) {
  const auto& st = s.stats();
  StreamSummary r;
  r.name = st.name;
  r.source = st.source;
  r.decoder = st.decoder_name();
  r.live = st.live;
  r.gpu_frames = st.gpu_frames;
  r.engine = st.engine;
  r.gpu = st.gpu;
  r.frames = st.classified;
  r.dropped = st.queue_dropped;
  r.output_dropped = st.output_dropped;
  r.reconnects = st.reconnects;
  r.non_finite = st.non_finite;
  r.failed_images = st.failed_items;
  r.damaged_frames = st.damaged_frames;
  r.lost_frames = st.lost_frames;
  r.fps = st.average_fps();
  if (const int64_t at = st.opening_ns) r.opening_s = seconds_between(start, from_steady_ns(at));
  if (const int64_t at = st.started_ns) r.started_s = seconds_between(start, from_steady_ns(at));
  if (const int64_t at = st.linked_ns) r.linked_s = seconds_between(start, from_steady_ns(at));
  if (const int64_t at = st.decoded_ns) r.decoded_s = seconds_between(start, from_steady_ns(at));
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
    r.code = f->code;
  } else {
    // A stream that had ended by itself before the stop request is complete; one the service removed says so.
    const auto reason = st.end_reason_text();
    r.status = reason == "removed" ? "removed" : interrupted && reason == "stopped" ? "interrupted" : "ok";
  }
  return r;
}

void total_latency(RunSummary& summary) {
  std::vector<double> p50s;
  for (const auto& row : summary.streams) {
    summary.latency_p99_ms = std::max(summary.latency_p99_ms, row.latency_p99_ms);
    p50s.push_back(row.latency_p50_ms);
  }
  if (p50s.empty()) return;
  std::nth_element(p50s.begin(), p50s.begin() + long(p50s.size() / 2), p50s.end());
  summary.latency_p50_ms = p50s[p50s.size() / 2];
}

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
    if (s.engines.size() > 1) status += fmt::format(", engine {}{}", r.engine, r.gpu >= 0 ? fmt::format(" (GPU {})", r.gpu) : "");
    out += fmt::format("{:<12} {:>8} {:>7} {:>8.1f} {:>6.1f} ms {:>6.1f} ms {:>6.1f} ms  {}\n", r.name, r.frames,
                       r.dropped + r.output_dropped, r.fps, r.latency_mean_ms, r.latency_p50_ms, r.latency_p99_ms, status);
    if (!r.error.empty()) out += fmt::format("{:<12} {}\n", "", r.error);
  }
  if (s.earlier_streams > 0) {
    out += fmt::format("{:<12} {} earlier stream(s) removed while the run went on (counted in the total, not listed)\n",
                       "…", s.earlier_streams);
  }
  const double fps = s.seconds > 0 ? double(s.frames) / s.seconds : 0;
  out += fmt::format("{:<12} {:>8} {:>7} {:>8.1f} {:>9} {:>6.1f} ms {:>6.1f} ms  {:.1f} s{}\n", "total", s.frames, s.dropped,
                     fps, "", s.latency_p50_ms, s.latency_p99_ms, s.seconds, s.interrupted ? ", interrupted" : "");
  for (const auto& e : s.engines) {  // several engines: what each did
    if (s.engines.size() < 2) break;
    out += fmt::format("engine {} ({}): {} stream(s), {} frames, {:.1f} fps, {} batches{}\n", e.engine, e.name,
                       e.streams, e.frames, s.seconds > 0 ? double(e.frames) / s.seconds : 0.0, e.batches,
                       e.failure.empty() ? "" : ", FAILED: " + e.failure);
  }
  if (s.unclassified > 0) {
    out += fmt::format("stopped: {} frame(s) in the engine's hands got no result (the stop cut its batch short)\n",
                       s.unclassified);
  }
  if (!s.events.empty()) out += "events: " + s.events + "\n";
  if (!s.collected.empty()) out += "collected: " + s.collected + "\n";
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

void report_losses(RunSummary& summary, const EventStats* events, const std::string& events_dir, const Collector* collector,
                   double collect_below, const std::vector<SinkStatus>& sinks) {
  if (events) {
    summary.event_count = events->opened;
    summary.event_clips = events->clips;
    summary.event_clip_bytes = events->clip_bytes;
    summary.event_failures = events->failures + events->dropped;
    summary.events = fmt::format("{} event(s), {} clip(s), {} snapshot(s) in {}", events->opened.load(),
                                 events->clips.load(), events->snapshots.load(), events_dir);
  }
  if (events && (events->failures > 0 || events->dropped > 0)) {
    // Recording never stops the classification, but what it lost is lost: said, and in the code.
    summary.problems.push_back(fmt::format("events: {} file(s) could not be written, {} dropped (the disk was full or "
                                           "too slow; see the errors above)", events->failures.load(),
                                           events->dropped.load()));
    if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
  }
  if (collector) {
    summary.collected = fmt::format("{} frame(s) below {:.0f}% confidence kept for review in {}", collector->saved(),
                                    collect_below * 100, collector->dir());
    if (const auto lost = collector->lost()) {
      summary.problems.push_back(fmt::format("output.collect: {} frame(s) could not be kept", lost));
      if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
    }
  }
  for (const auto& sink : sinks) {
    summary.sink_drops.emplace_back(sink.name, sink.dropped);
    if (sink.dropped == 0) continue;
    // Best-effort sinks never hold the video back, but what they dropped is lost all the same: say so in the code.
    summary.problems.push_back(fmt::format("{}: {} message(s) dropped", sink.name, sink.dropped));
    if (summary.code == ExitCode::kOk) summary.code = ExitCode::kIoError;
  }
}

void settle_exit_status(RunSummary& summary, const std::vector<std::optional<Failure>>& failures,
                        std::chrono::seconds stop_grace) {
  for (const auto& f : failures) {
    if (!f) continue;
    summary.problems.push_back(f->message);
    if (summary.code == ExitCode::kOk) summary.code = f->code;
  }
  for (const auto& row : summary.streams) {  // (a stream's failure is in its row of the summary: not repeated here)
    if (row.status != "failed") continue;
    summary.failed_streams.push_back(row.name);
    if (summary.code == ExitCode::kOk) summary.code = row.code;
  }
  for (const auto& name : summary.abandoned) {
    summary.problems.push_back(fmt::format("stream {}: its source did not stop (no stream finished for {} s); left running",
                                           name, stop_grace.count()));
    if (summary.code == ExitCode::kOk) summary.code = ExitCode::kUnavailable;
  }
}

void warn_if_writing_nothing(const config::Config& cfg) {
  if (cfg.output.kind == config::OutputKind::None && cfg.output.results.empty() && !cfg.mqtt.enabled &&
      cfg.events.rules.empty() && !cfg.metrics.enabled && !cfg.api.enabled) {
    vc::log::get("pipeline")->warn("classifying, but writing nothing: add --output FILE.mp4 or --set "
                                   "output.results=FILE.jsonl (or - for stdout)");
  }
}

}  // namespace vc::pipeline
