// The live view of the service (api.enabled), over the run's live hub (pipeline/live/):
//   GET /api/v1/streams/NAME/live.mp4   the stream's own H.264/H.265 as fragmented MP4, remuxed (never decoded or
//                                       encoded; a raw source is encoded once while watched), chunked: the init
//                                       segment, the pictures since the last keyframe, then one fragment per picture.
//                                       X-Live-Session names the muxer run its times belong to. 415 for another codec
//                                       (the page then shows live.mjpeg), 503 beyond api.live_clients.
//   GET /api/v1/streams/NAME/results    its results lines as server-sent events, each with "live": {"session", "t"}
//                                       (where its frame is in that video) while someone watches.
//   GET /api/v1/results?streams=A,B     the same for several streams in one feed (a browser opens 6 connections to a
//                                       server: a page of live streams needs one feed); "event: end" when one ends.
// A viewer that cannot keep up skips pictures up to the next keyframe; it never holds the stream back. Counted per
// stream for /metrics: viewers, bytes sent, fragments skipped.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/control.hpp"
#include "service/http/http_message.hpp"

namespace vc::service {

class LiveViews {
 public:
  struct Counts {
    int viewers = 0, result_streams = 0;
    int64_t bytes = 0, skipped = 0;
  };

  LiveViews(const config::Api& settings, pipeline::RunControl& run) : settings_(settings), run_(run) {}

  http::Response video(const std::string& name);
  // The results of these streams, one feed (`one`: the single stream's route, which ends with its stream).
  http::Response results(const std::vector<std::string>& names, bool one);
  // Every stream watched since the start (by name), for /metrics.
  [[nodiscard]] std::map<std::string, Counts> counts() const;

 private:
  struct Counters {
    std::atomic<int> viewers{0}, result_streams{0};
    std::atomic<int64_t> bytes{0}, skipped{0};
  };
  // A place for one more viewer (`results`: a result stream) in all, and of stream `name`, or the 503 that says why
  // there is none. The place is given back when the handle goes.
  std::shared_ptr<void> claim_total(bool results);
  std::shared_ptr<void> claim(const std::string& name, bool results, std::shared_ptr<Counters>& counters);

  const config::Api settings_;
  pipeline::RunControl& run_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Counters>> streams_;
  // Viewers and result streams at once, in all (shared with the places they hold).
  std::shared_ptr<std::atomic<int>> viewers_ = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> result_streams_ = std::make_shared<std::atomic<int>>(0);
};

}  // namespace vc::service
