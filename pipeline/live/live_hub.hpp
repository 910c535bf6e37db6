// Every stream's live view for the service: its video (live_feed.hpp) and its results as they come, each result
// with its frame's place in that video, so that a page draws the label of the picture it shows. The run makes one
// with the API; a stream joins it before it starts.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/core/control.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/live/live_feed.hpp"
#include "pipeline/sources/packets.hpp"
#include "pipeline/sources/stream.hpp"

namespace vc::pipeline {

class LiveHub {
 public:
  LiveHub();
  ~LiveHub();
  LiveHub(const LiveHub&) = delete;
  LiveHub& operator=(const LiveHub&) = delete;

  // A stream joins, before it starts (a reused slot starts afresh): its packets come here, and go on to `clips` (the
  // event clips; may be empty). Without clips, a raw source encodes its packets only while someone watches.
  void add_stream(Stream& stream, PacketSink clips);
  // The sink that goes with the run's result sinks: each result to its stream's subscribers; a stream's end ends its
  // viewers. The hub outlives it.
  std::unique_ptr<ResultSink> results_sink();

  // RunControl's watch_video and watch_results (RequestError 404 for a stream the hub does not have, or that ended).
  std::shared_ptr<void> watch_video(const std::string& name, LiveViewer viewer, uint64_t& session);
  std::shared_ptr<void> watch_results(const std::string& name, std::function<bool(const std::string&)> send,
                                      std::function<void()> end);

 private:
  class Sink;
  struct Subscriber {
    std::function<bool(const std::string&)> send;
    std::function<void()> end;
    std::shared_ptr<std::atomic<bool>> held;
  };
  struct Watched {
    std::string name;
    std::shared_ptr<LiveFeed> feed;
    std::vector<Subscriber> subscribers;
    bool ended = false;
  };
  void frame(const FrameResult& r);
  void end_stream(int id);
  Watched& find(const std::string& name);  // mutex held; RequestError 404

  mutable std::mutex mutex_;
  std::map<int, Watched> streams_;  // by slot
};

}  // namespace vc::pipeline
