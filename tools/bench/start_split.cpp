#include "bench/start_split.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace vc::bench {

using nlohmann::json;

namespace {

json p50_max(const std::vector<double>& v) { return {{"p50", percentile(v, 0.5)}, {"max", percentile(v, 1.0)}}; }

}  // namespace

json start_split(const std::vector<pipeline::StreamSummary>& streams) {
  std::vector<double> opening_ms, first_frame_ms, linked_ms, decoded_ms, delivered_ms;
  double last_opened = 0;
  for (const auto& r : streams) {
    if (r.name.rfind("churn", 0) == 0 || r.opening_s < 0 || r.started_s < 0) continue;
    opening_ms.push_back(1000 * (r.started_s - r.opening_s));
    last_opened = std::max(last_opened, r.started_s);
    if (r.first_frame_s >= 0) first_frame_ms.push_back(1000 * (r.first_frame_s - r.started_s));
    if (r.linked_s >= 0) linked_ms.push_back(1000 * (r.linked_s - r.started_s));
    if (r.linked_s >= 0 && r.decoded_s >= 0) decoded_ms.push_back(1000 * (r.decoded_s - r.linked_s));
    if (r.decoded_s >= 0 && r.first_frame_s >= 0) delivered_ms.push_back(1000 * (r.first_frame_s - r.decoded_s));
  }
  return {{"last_opened_s", last_opened},
          {"open_ms", p50_max(opening_ms)},
          {"first_frame_after_open_ms", p50_max(first_frame_ms)},
          {"linked_after_open_ms", p50_max(linked_ms)},
          {"decoded_after_linked_ms", p50_max(decoded_ms)},
          {"delivered_after_decoded_ms", p50_max(delivered_ms)}};
}

void print_start_split(const json& st) {
  const auto ms = [&](const char* key, const char* which) { return st[key][which].get<double>(); };
  fmt::print("       the start: every source open {:.1f} s after the run's start (opening one: p50 {:.0f} ms, max {:.0f} "
             "ms), then its first frame p50 {:.0f} ms, max {:.0f} ms later\n", st["last_opened_s"].get<double>(),
             ms("open_ms", "p50"), ms("open_ms", "max"), ms("first_frame_after_open_ms", "p50"),
             ms("first_frame_after_open_ms", "max"));
  fmt::print("       of which (p50/max ms): the demuxer finding the video {:.0f}/{:.0f}, then the decoder's first picture "
             "{:.0f}/{:.0f}, then that picture reaching the stream {:.0f}/{:.0f}\n",
             ms("linked_after_open_ms", "p50"), ms("linked_after_open_ms", "max"), ms("decoded_after_linked_ms", "p50"),
             ms("decoded_after_linked_ms", "max"), ms("delivered_after_decoded_ms", "p50"),
             ms("delivered_after_decoded_ms", "max"));
}

}  // namespace vc::bench
