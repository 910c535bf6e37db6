#include "pipeline/live/live_hub.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pipeline/results/results.hpp"

namespace vc::pipeline {

// The hub's end of the post stage: results in the stage's order, on its thread.
class LiveHub::Sink final : public ResultSink {
 public:
  explicit Sink(LiveHub& hub) : hub_(hub) {}
  void frame(const FrameResult& r) override { hub_.frame(r); }
  void event(const StreamEvent&) override {}
  void end_stream(int stream) override { hub_.end_stream(stream); }
  void close() override {}
  std::string name() const override { return "live view"; }

 private:
  LiveHub& hub_;
};

LiveHub::LiveHub() = default;

LiveHub::~LiveHub() {
  std::vector<std::shared_ptr<LiveFeed>> feeds;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, s] : streams_) {
      for (auto& sub : s.subscribers) {
        if (sub.end) sub.end();
      }
      feeds.push_back(s.feed);
    }
  }
  for (auto& f : feeds) f->end();  // (a muxer stopped here, not under the hub's lock)
}

void LiveHub::add_stream(Stream& stream, PacketSink clips) {
  auto feed = std::make_shared<LiveFeed>("stream " + stream.stats().name);
  std::shared_ptr<LiveFeed> old;
  {
    std::lock_guard lock(mutex_);
    auto& w = streams_[stream.id()];
    old = w.feed;  // a reused slot: whoever watched the old stream sees its end
    for (auto& sub : w.subscribers) {
      if (sub.end) sub.end();
    }
    w = Watched{stream.stats().name, feed, {}, false};
  }
  if (old) old->end();
  std::function<bool()> wanted;
  if (!clips) wanted = [feed] { return feed->watched(); };
  stream.set_packet_sink([feed, clips = std::move(clips)](const Packet& p) {
    if (clips) clips(p);
    feed->packet(p);
  }, std::move(wanted));
}

std::unique_ptr<ResultSink> LiveHub::results_sink() { return std::make_unique<Sink>(*this); }

LiveHub::Watched& LiveHub::find(const std::string& name) {
  for (auto& [id, w] : streams_) {
    if (w.name == name && !w.ended) return w;
  }
  throw RequestError(404, fmt::format("no stream is named '{}'", name));
}

std::shared_ptr<void> LiveHub::watch_video(const std::string& name, LiveViewer viewer, uint64_t& session) {
  std::shared_ptr<LiveFeed> feed;
  {
    std::lock_guard lock(mutex_);
    feed = find(name).feed;
  }
  return feed->watch(std::move(viewer), session);
}

std::shared_ptr<void> LiveHub::watch_results(const std::string& name, std::function<bool(const std::string&)> send,
                                             std::function<void()> end) {
  std::lock_guard lock(mutex_);
  auto held = std::make_shared<std::atomic<bool>>(true);
  auto& subs = find(name).subscribers;
  std::erase_if(subs, [](const Subscriber& s) { return !*s.held; });  // (a stream with no results now: they stay few)
  subs.push_back({std::move(send), std::move(end), held});
  // Released on any thread (in a subscriber's own send() too): it only says so, the next result lets it go.
  return std::shared_ptr<void>(nullptr, [held](void*) { *held = false; });
}

void LiveHub::frame(const FrameResult& r) {
  std::lock_guard lock(mutex_);
  const auto it = streams_.find(r.stream);
  if (it == streams_.end()) return;
  auto& subs = it->second.subscribers;
  std::erase_if(subs, [](const Subscriber& s) { return !*s.held; });
  if (subs.empty()) return;
  std::string line = to_json(r, false);
  if (const auto at = it->second.feed->live_time(r.pts_ns); at && !line.empty() && line.back() == '}') {
    line.pop_back();  // the frame's place in the live video, beside what the results file has
    line += fmt::format(R"(,"live":{{"session":{},"t":{:.6f}}}}})", at->session, at->t);
  }
  std::erase_if(subs, [&](const Subscriber& s) { return !s.send(line); });
}

void LiveHub::end_stream(int id) {
  std::shared_ptr<LiveFeed> feed;
  {
    std::lock_guard lock(mutex_);
    const auto it = streams_.find(id);
    if (it == streams_.end()) return;
    for (auto& sub : it->second.subscribers) {
      if (sub.end) sub.end();
    }
    it->second.subscribers.clear();
    it->second.ended = true;
    feed = it->second.feed;
  }
  feed->end();  // (its muxer stopped here, not under the hub's lock)
}

}  // namespace vc::pipeline
