#include "bench/steady_window.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace vc::bench {
namespace {

using Clock = std::chrono::steady_clock;
using pipeline::LatencyHistogram;
using pipeline::StreamStats;

// Percentiles over a window come from differences of cumulative counts at these bounds: 0.05 ms to 20 s, 5 % apart
// (the histograms' own buckets are 3 % wide).
const std::vector<double>& bounds() {
  static const std::vector<double> b = [] {
    std::vector<double> v;
    for (double ms = 0.05; ms < 20000; ms *= 1.05) v.push_back(ms);
    return v;
  }();
  return b;
}

struct Distribution {
  int64_t count = 0;
  double sum_ms = 0;
  std::vector<int64_t> at_most;  // per bound

  static Distribution of(const LatencyHistogram& h) {
    Distribution d{h.count(), h.sum_ms(), {}};
    d.at_most.reserve(bounds().size());
    for (const double ms : bounds()) d.at_most.push_back(h.count_at_most(ms));
    return d;
  }
};

constexpr std::array<const char*, 5> kHistograms{"latency", "queue", "inference", "post", "output"};

const LatencyHistogram& histogram(const StreamStats& s, size_t i) {
  switch (i) {
    case 0: return s.latency;
    case 1: return s.queue_wait;
    case 2: return s.inference;
    case 3: return s.post;
    default: return s.output;
  }
}

// A window's distribution over every stream: counts and sums of `last` less `first`, per bound.
struct Window {
  int64_t count = 0;
  double sum_ms = 0;
  std::vector<int64_t> at_most = std::vector<int64_t>(bounds().size(), 0);
  void add(const Distribution& last, const Distribution& first) {
    count += last.count - first.count;
    sum_ms += last.sum_ms - first.sum_ms;
    for (size_t b = 0; b < at_most.size(); ++b) at_most[b] += last.at_most[b] - first.at_most[b];
  }
  [[nodiscard]] double percentile(double q) const {
    if (count <= 0) return 0;
    for (size_t b = 0; b < at_most.size(); ++b) {
      if (double(at_most[b]) >= q * double(count)) return bounds()[b];
    }
    return bounds().back();
  }
};

}  // namespace

struct SteadyWindow::Counts {
  struct Stream {
    std::string name;
    int64_t delivered, classified, queue_dropped, output_dropped;
    std::array<Distribution, kHistograms.size()> histograms;
  };
  std::vector<Stream> streams;

  static std::unique_ptr<Counts> of(const std::vector<std::shared_ptr<const StreamStats>>& streams) {
    auto c = std::make_unique<Counts>();
    for (const auto& s : streams) {
      Stream one{s->name, s->delivered, s->classified, s->queue_dropped, s->output_dropped, {}};
      for (size_t i = 0; i < kHistograms.size(); ++i) one.histograms[i] = Distribution::of(histogram(*s, i));
      c->streams.push_back(std::move(one));
    }
    return c;
  }
  [[nodiscard]] int64_t dropped() const {
    int64_t n = 0;
    for (const auto& s : streams) n += s.queue_dropped + s.output_dropped;
    return n;
  }
};

SteadyWindow::SteadyWindow(pipeline::RunControl& run, int streams, double settle_s)
    : run_(run), streams_(streams), settle_s_(settle_s), thread_([this] { watch(); }) {}

SteadyWindow::~SteadyWindow() {
  close();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::shared_ptr<const StreamStats>> SteadyWindow::watched() const {
  std::vector<std::shared_ptr<const StreamStats>> out;
  for (auto& s : run_.streams()) {
    if (s->name.rfind("churn", 0) != 0 && int(out.size()) < streams_) out.push_back(std::move(s));
  }
  return out;
}

void SteadyWindow::close() {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  closed_ = true;
  if (first_) {
    last_ = Counts::of(watched());
    threads_last_ = thread_times();
    threads_last_at_ = Clock::now();
  }
  wake_.notify_all();
}

void SteadyWindow::watch() {
  const auto t0 = Clock::now();
  const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::unique_lock lock(mutex_);
  // Every stream's first frame, then settle_s.
  Clock::time_point all_started{};
  for (;;) {
    if (wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return closed_; })) return;
    const auto streams = watched();
    note_start_drops(streams, seconds_since(t0));
    const bool all = int(streams.size()) == streams_ &&
                     std::all_of(streams.begin(), streams.end(), [](const auto& s) { return s->first_frame_ns > 0; });
    if (!all) continue;
    if (all_started == Clock::time_point{}) all_started = Clock::now();
    if (seconds_since(all_started) >= settle_s_) break;
  }
  first_ = Counts::of(watched());
  threads_first_ = thread_times();
  threads_first_at_ = Clock::now();
  opened_s_ = seconds_since(t0);
  const auto opened = Clock::now();
  int64_t dropped_before = first_->dropped();
  // Every second: the drops since the last, and each stream's frames in flight.
  while (!wake_.wait_for(lock, std::chrono::seconds(1), [&] { return closed_; })) {
    const auto now = Counts::of(watched());
    drops_by_second_.push_back(now->dropped() - dropped_before);
    dropped_before = now->dropped();
    for (const auto& s : now->streams) {
      const int64_t flight = s.delivered - s.classified - s.queue_dropped;
      in_flight_sum_ += double(flight);
      ++in_flight_samples_;
      if (flight > in_flight_max_) {
        in_flight_max_ = flight;
        in_flight_max_stream_ = s.name;
      }
    }
    seconds_ = seconds_since(opened);
  }
  seconds_ = seconds_since(opened);
}

void SteadyWindow::note_start_drops(const std::vector<std::shared_ptr<const StreamStats>>& streams, double at_s) {
  StartSecond now;  // (counts since the start)
  for (const auto& s : streams) {
    now.queue += s->queue_dropped;
    now.output += s->output_dropped;
    now.started += s->first_frame_ns > 0 ? 1 : 0;
  }
  const auto& batch_ms = run_.engine().batch_ms;
  now.batches = batch_ms.count();
  now.over_33ms = now.batches - batch_ms.count_at_most(33.3);
  now.busy_ms = batch_ms.sum_ms();
  const auto second = size_t(at_s);
  if (start_seconds_.size() <= second) start_seconds_.resize(second + 1);
  auto& d = start_seconds_[second];
  if (now.queue + now.output > start_seen_.queue + start_seen_.output) d.started = now.started;
  d.queue += now.queue - start_seen_.queue;
  d.output += now.output - start_seen_.output;
  d.batches += now.batches - start_seen_.batches;
  d.over_33ms += now.over_33ms - start_seen_.over_33ms;
  d.busy_ms += now.busy_ms - start_seen_.busy_ms;
  start_seen_ = now;
}

nlohmann::json SteadyWindow::report() const {
  std::lock_guard lock(mutex_);
  nlohmann::json start_drops = nlohmann::json::array();
  for (size_t second = 0; second < start_seconds_.size(); ++second) {
    const auto& d = start_seconds_[second];
    if (d.queue + d.output == 0) continue;
    start_drops.push_back({{"second", second}, {"queue", d.queue}, {"output", d.output}, {"streams_started", d.started},
                           {"batches", d.batches}, {"engine_busy_ms", d.busy_ms}, {"batches_over_33ms", d.over_33ms}});
  }
  if (!first_ || !last_) return {{"opened", false}, {"start_drops", start_drops}};
  int64_t frames = 0, queue = 0, output = 0;
  nlohmann::json by_stream = nlohmann::json::object();
  std::array<Window, kHistograms.size()> windows;
  for (size_t i = 0; i < last_->streams.size() && i < first_->streams.size(); ++i) {
    const auto& a = first_->streams[i];
    const auto& b = last_->streams[i];
    frames += b.classified - a.classified;
    const int64_t q = b.queue_dropped - a.queue_dropped, o = b.output_dropped - a.output_dropped;
    queue += q;
    output += o;
    if (q + o > 0) by_stream[b.name] = q + o;
    for (size_t h = 0; h < kHistograms.size(); ++h) windows[h].add(b.histograms[h], a.histograms[h]);
  }
  nlohmann::json stages = nlohmann::json::object();
  for (size_t h = 1; h < kHistograms.size(); ++h) {
    const auto& w = windows[h];
    stages[kHistograms[h]] = {{"mean", w.count > 0 ? w.sum_ms / double(w.count) : 0}, {"p99", w.percentile(0.99)}};
  }
  return {{"opened", true},
          {"opened_s", opened_s_},
          {"seconds", seconds_},
          {"frames", frames},
          {"fps", seconds_ > 0 ? double(frames) / seconds_ : 0},
          {"dropped", queue + output},
          {"dropped_in_queue", queue},
          {"dropped_at_output", output},
          {"dropped_by_stream", by_stream},
          {"latency_ms", {{"p50", windows[0].percentile(0.5)}, {"p99", windows[0].percentile(0.99)}}},
          {"stages_ms", stages},
          {"in_flight", {{"mean", in_flight_samples_ > 0 ? in_flight_sum_ / double(in_flight_samples_) : 0},
                         {"max", in_flight_max_},
                         {"max_stream", in_flight_max_stream_}}},
          {"drops_by_second", drops_by_second_},
          {"start_drops", start_drops},
          {"threads", thread_cores(threads_first_, threads_last_,
                                   std::chrono::duration<double>(threads_last_at_ - threads_first_at_).count(), 10)}};
}

void print_steady(const nlohmann::json& steady) {
  if (!steady.is_object()) return;
  if (steady.contains("start_drops") && !steady["start_drops"].empty()) {
    std::string when;
    for (const auto& d : steady["start_drops"]) {
      when += fmt::format("{}at {} s {} ({} in the queue, {} streams started; the engine ran {} batches, busy {:.0f} ms, {} "
                          "over 33 ms)", when.empty() ? "" : "; ", d["second"].get<int>(),
                          d["queue"].get<int64_t>() + d["output"].get<int64_t>(), d["queue"].get<int64_t>(),
                          d["streams_started"].get<int>(), d.value("batches", int64_t(0)), d.value("engine_busy_ms", 0.0),
                          d.value("batches_over_33ms", int64_t(0)));
    }
    fmt::print("       dropped before the steady window, by second from the start: {}\n", when);
  }
  if (!steady.value("opened", false)) return;
  const auto& st = steady["stages_ms"];
  const auto stage = [&](const char* name) {
    return fmt::format("{} {:.1f}/{:.1f}", name, st[name]["mean"].get<double>(), st[name]["p99"].get<double>());
  };
  fmt::print("       steady {:.0f} s (from {:.1f} s): {:.1f} fps, {} dropped ({} in the queue, {} at the output), p50 {:.1f} "
             "p99 {:.1f} ms; stages mean/p99 ms: {}, {}, {}, {}; frames in flight per stream mean {:.1f}, max {} ({})\n",
             steady["seconds"].get<double>(), steady["opened_s"].get<double>(), steady["fps"].get<double>(),
             steady["dropped"].get<int64_t>(), steady["dropped_in_queue"].get<int64_t>(),
             steady["dropped_at_output"].get<int64_t>(), steady["latency_ms"]["p50"].get<double>(),
             steady["latency_ms"]["p99"].get<double>(), stage("queue"), stage("inference"), stage("post"), stage("output"),
             steady["in_flight"]["mean"].get<double>(), steady["in_flight"]["max"].get<int64_t>(),
             steady["in_flight"]["max_stream"].get<std::string>());
  if (steady.contains("threads") && !steady["threads"].empty()) {
    std::string busiest;
    for (const auto& t : steady["threads"]) {
      busiest += fmt::format("{}{} x{} {:.2f}", busiest.empty() ? "" : ", ", t["name"].get<std::string>(),
                             t["threads"].get<int>(), t["cores"].get<double>());
      if (t.contains("waited")) busiest += fmt::format(" (waited {:.2f})", t["waited"].get<double>());
    }
    fmt::print("       steady window's busiest threads (CPU cores; waited: cores' worth of time runnable but not "
               "running): {}\n", busiest);
  }
}

}  // namespace vc::bench
