#include "service/live/live_views.hpp"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "service/api_views.hpp"

namespace vc::service {
namespace {

using http::LiveBody;
using http::Response;

constexpr size_t kVideoQueueBytes = size_t(4) << 20;   // a viewer's unsent video (seconds of it): beyond, it skips
constexpr size_t kResultQueueBytes = size_t(256) << 10;  // a result stream's unsent lines
constexpr size_t kMaxStreamsPerFeed = 256;               // streams one result stream may carry

}  // namespace

std::shared_ptr<void> LiveViews::claim_total(bool results) {
  auto total = results ? result_streams_ : viewers_;
  if (++*total > settings_.live_clients) {
    --*total;
    throw pipeline::RequestError(503, fmt::format("{} live {} are open already (api.live_clients)", settings_.live_clients,
                                                  results ? "result streams" : "viewers"));
  }
  return std::shared_ptr<void>(nullptr, [total](void*) { --*total; });
}

std::shared_ptr<void> LiveViews::claim(const std::string& name, bool results, std::shared_ptr<Counters>& counters) {
  // (only a stream the run has gets counters: a name made up by a client adds nothing to the table or /metrics)
  if (!find_stream(run_, name)) throw pipeline::RequestError(404, fmt::format("no stream is named '{}'", name));
  {
    std::lock_guard lock(mutex_);
    auto& c = streams_[name];
    if (!c) c = std::make_shared<Counters>();
    counters = c;
  }
  auto& mine = results ? counters->result_streams : counters->viewers;
  if (++mine > settings_.live_clients_per_stream) {
    --mine;
    throw pipeline::RequestError(503, fmt::format("{} live {} of stream {} are open already (api.live_clients_per_stream)",
                                                  settings_.live_clients_per_stream, results ? "result streams" : "viewers",
                                                  name));
  }
  return std::shared_ptr<void>(nullptr, [counters, results](void*) { --(results ? counters->result_streams : counters->viewers); });
}

Response LiveViews::video(const std::string& name) {
  try {
    std::shared_ptr<Counters> counters;
    auto total = claim_total(false);
    auto place = claim(name, false, counters);
    auto body = std::make_shared<LiveBody>(kVideoQueueBytes);
    std::weak_ptr<LiveBody> weak = body;
    pipeline::LiveViewer viewer;
    // A piece skipped (the viewer is behind) leaves the next ones undecodable: it skips up to the next keyframe.
    viewer.send = [weak, counters, need_key = false](const std::string& bytes, bool keyframe) mutable {
      const auto b = weak.lock();
      if (!b) return false;
      if (need_key && !keyframe) {
        ++counters->skipped;
        return true;
      }
      switch (b->offer(bytes)) {
        case LiveBody::Offered::Closed: return false;
        case LiveBody::Offered::Skipped:
          need_key = true;
          ++counters->skipped;
          return true;
        case LiveBody::Offered::Queued: break;
      }
      need_key = false;
      counters->bytes += int64_t(bytes.size());
      return true;
    };
    viewer.end = [weak] {
      if (const auto b = weak.lock()) b->finish();
    };
    uint64_t session = 0;
    auto watch = run_.watch_video(name, std::move(viewer), session);
    body->hold(std::make_shared<std::vector<std::shared_ptr<void>>>(
        std::vector<std::shared_ptr<void>>{std::move(watch), std::move(place), std::move(total)}));
    Response r;
    r.content_type = "video/mp4";
    r.header("Cache-Control", "no-store");
    r.header("X-Live-Session", std::to_string(session));
    r.live = std::move(body);
    return r;
  } catch (const pipeline::RequestError& e) {
    return error_reply(e.status(), e.what());
  }
}

Response LiveViews::results(const std::vector<std::string>& names, bool one) {
  try {
    if (names.empty() || names.size() > kMaxStreamsPerFeed) {
      return error_reply(422, fmt::format("streams: from 1 to {} stream names, comma-separated", kMaxStreamsPerFeed), "streams");
    }
    if (std::set<std::string>(names.begin(), names.end()).size() != names.size()) {
      return error_reply(422, "streams: a stream is named twice", "streams");
    }
    auto body = std::make_shared<LiveBody>(kResultQueueBytes);
    std::weak_ptr<LiveBody> weak = body;
    std::vector<std::shared_ptr<void>> held{claim_total(true)};
    for (const auto& name : names) {
      std::shared_ptr<Counters> counters;
      held.push_back(claim(name, true, counters));
      auto send = [weak, counters](const std::string& line) {
        const auto b = weak.lock();
        if (!b) return false;
        const auto offered = b->offer(fmt::format("data: {}\n\n", line));
        if (offered == LiveBody::Offered::Skipped) ++counters->skipped;
        if (offered == LiveBody::Offered::Queued) counters->bytes += int64_t(line.size() + 8);
        return offered != LiveBody::Offered::Closed;
      };
      // The stream ended: one stream's feed ends with it; a feed of several says so and goes on with the others.
      auto end = [weak, one, name] {
        const auto b = weak.lock();
        if (!b) return;
        if (one) return b->finish();
        b->push(fmt::format("event: end\ndata: {}\n\n", nlohmann::json{{"stream", name}}.dump()));
      };
      held.push_back(run_.watch_results(name, std::move(send), std::move(end)));
    }
    body->hold(std::make_shared<std::vector<std::shared_ptr<void>>>(std::move(held)));
    body->push(": results\n\n");  // (a comment: the events start with the next result)
    Response r;
    r.content_type = "text/event-stream";
    r.header("Cache-Control", "no-store");
    r.live = std::move(body);
    return r;
  } catch (const pipeline::RequestError& e) {
    return error_reply(e.status(), e.what());
  }
}

std::map<std::string, LiveViews::Counts> LiveViews::counts() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, Counts> out;
  for (const auto& [name, c] : streams_) out[name] = {c->viewers.load(), c->result_streams.load(), c->bytes.load(), c->skipped.load()};
  return out;
}

}  // namespace vc::service
