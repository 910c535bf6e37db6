#include "pipeline/core/stats.hpp"

#include <algorithm>
#include <cmath>

#include "config/redact.hpp"

namespace vc::pipeline {
namespace {

constexpr double kFirst = 0.01;    // ms: the first bucket's upper bound
constexpr double kRatio = 1.03;    // each bucket 3 % wider than the previous

}  // namespace

int LatencyHistogram::bucket_of(double ms) {
  if (!(ms > kFirst)) return 0;
  const int b = int(std::ceil(std::log(ms / kFirst) / std::log(kRatio)));
  return std::clamp(b, 0, kBuckets - 1);
}

double LatencyHistogram::upper_bound_of(int bucket) { return kFirst * std::pow(kRatio, bucket); }

void LatencyHistogram::add(double ms) {
  std::lock_guard lock(mutex_);
  if (!counts_) counts_ = std::make_unique<std::array<int64_t, kBuckets>>();
  ++(*counts_)[size_t(bucket_of(ms))];
  ++total_;
  sum_ += ms;
}

int64_t LatencyHistogram::count() const {
  std::lock_guard lock(mutex_);
  return total_;
}

double LatencyHistogram::sum_ms() const {
  std::lock_guard lock(mutex_);
  return sum_;
}

double LatencyHistogram::mean_ms() const {
  std::lock_guard lock(mutex_);
  return total_ ? sum_ / double(total_) : 0;
}

double LatencyHistogram::percentile_ms(double q) const {
  std::lock_guard lock(mutex_);
  if (total_ == 0) return 0;
  const auto rank = int64_t(std::ceil(std::clamp(q, 0.0, 1.0) * double(total_)));
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += (*counts_)[size_t(b)];
    if (seen >= std::max<int64_t>(rank, 1)) {
      // The geometric middle of the bucket: within 1.5 % of any value in it.
      return b == 0 ? kFirst : std::sqrt(upper_bound_of(b - 1) * upper_bound_of(b));
    }
  }
  return upper_bound_of(kBuckets - 1);
}

int64_t LatencyHistogram::count_at_most(double ms) const {
  std::lock_guard lock(mutex_);
  int64_t n = 0;
  if (!counts_) return 0;
  for (int b = 0; b < kBuckets && upper_bound_of(b) <= ms * (1 + 1e-9); ++b) n += (*counts_)[size_t(b)];
  return n;
}

void RateMeter::tick(Clock::time_point t) {
  const int64_t id = steady_ns(t) / 500'000'000;
  std::lock_guard lock(mutex_);
  if (first_id_ < 0) first_id_ = id;
  auto& slot = counts_[size_t(id % kSlots)];
  if (slot_ids_[size_t(id % kSlots)] != id) {
    slot_ids_[size_t(id % kSlots)] = id;
    slot = 0;
  }
  ++slot;
}

double RateMeter::per_second(Clock::time_point now) const {
  const int64_t id = steady_ns(now) / 500'000'000;
  std::lock_guard lock(mutex_);
  if (first_id_ < 0) return 0;
  // The completed slots of the window (the current one is still filling), no further back than the first tick.
  const int64_t slots = std::min<int64_t>(kSlots - 1, id - first_id_);
  if (slots <= 0) return 0;
  int64_t n = 0;
  for (int64_t k = 1; k <= slots; ++k) {
    const int64_t want = id - k;
    if (slot_ids_[size_t(want % kSlots)] == want) n += counts_[size_t(want % kSlots)];
  }
  return double(n) / (0.5 * double(slots));
}

const char* name(StreamState s) {
  switch (s) {
    case StreamState::Starting: return "starting";
    case StreamState::Running: return "running";
    case StreamState::Reconnecting: return "reconnecting";
    case StreamState::Ended: return "ended";
    case StreamState::Failed: return "failed";
  }
  return "?";
}

void StreamStats::set_decoder(const std::string& d) {
  std::lock_guard lock(text_mutex);
  decoder = d;
}
void StreamStats::set_error(const std::string& e) {
  std::lock_guard lock(text_mutex);
  if (error.empty()) error = config::redact_credentials(e);  // (shown by the API and the summary: no password)
}
void StreamStats::set_label(const inference::Prediction& p) {
  std::lock_guard lock(text_mutex);
  current = p;
}
void StreamStats::add_region_result(const std::string& region, const std::string& model, const inference::Prediction& top1) {
  std::lock_guard lock(text_mutex);
  auto it = std::find_if(regions_.begin(), regions_.end(), [&](const RegionStat& r) { return r.region == region; });
  if (it == regions_.end()) it = regions_.insert(regions_.end(), RegionStat{region, model, 0, {}});
  it->model = model;
  ++it->classified;
  it->current = top1;
}

void StreamStats::forget_region(const std::string& region) {
  std::lock_guard lock(text_mutex);
  std::erase_if(regions_, [&](const RegionStat& r) { return r.region == region; });
}

std::vector<StreamStats::RegionStat> StreamStats::region_stats() const {
  std::lock_guard lock(text_mutex);
  return regions_;
}

inference::Prediction StreamStats::label() const {
  std::lock_guard lock(text_mutex);
  return current;
}
void StreamStats::set_end_reason(const std::string& r) {
  std::lock_guard lock(text_mutex);
  end_reason = config::redact_credentials(r);
}
std::string StreamStats::end_reason_text() const {
  std::lock_guard lock(text_mutex);
  return end_reason;
}
std::string StreamStats::decoder_name() const {
  std::lock_guard lock(text_mutex);
  return decoder;
}
std::string StreamStats::error_text() const {
  std::lock_guard lock(text_mutex);
  return error;
}

double StreamStats::average_fps() const {
  const int64_t first = first_frame_ns, last = last_result_ns;
  const int64_t n = classified;
  if (n < 2 || last <= first) return 0;
  return double(n) / (double(last - first) * 1e-9);
}

void EngineStats::add_batch(size_t size, double ms) {
  batch_ms.add(ms);
  int bucket = 0;
  while (bucket + 1 < kSizeBuckets && (size_t(1) << bucket) < size) ++bucket;
  ++batch_sizes[size_t(bucket)];
  ++batches;
  frames += int64_t(size);
}

int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
Clock::time_point from_steady_ns(int64_t ns) { return Clock::time_point(std::chrono::nanoseconds(ns)); }

}  // namespace vc::pipeline
