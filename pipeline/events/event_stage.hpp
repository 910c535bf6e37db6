// Events a person can act on: the rules (events.rules) watch each stream's results and open, update and end events
// (rule_tracker.hpp); each event gets a clip of the stream's own packets from pre_s before its start to post_s after
// its end (packet_ring.hpp, clip_writer.hpp) and a snapshot of its peak frame with a thumbnail; every change goes to
// events.jsonl and, returned to the post stage, to every result sink (results file, MQTT PREFIX/STREAM/event).
// Files are written on threads of their own with bounded queues — a slow or full disk stops recording (an error and
// a metric), never the classification — and kept within bounds (retention.hpp). Folder: events.dir/STREAM/.
#pragma once
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>

#include "config/config.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/frame.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/events/clip_writer.hpp"
#include "pipeline/events/packet_ring.hpp"
#include "pipeline/events/retention.hpp"
#include "pipeline/events/rule_tracker.hpp"
#include "pipeline/outputs/overlay.hpp"
#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

class EventStage {
 public:
  // `streams`: every stream's statistics, by stream id; `labels`: the model's (empty: not checked). Throws
  // vc::ConfigError for a rule naming a label the model does not have or a stream the run does not have,
  // vc::CantCreateError when events.dir cannot be made.
  // `capacity`: the most streams the run may have (streams added while it runs: add_stream).
  // `region_labels`: the labels of the model of each region (by name) the configuration has, for the rules that
  // watch regions.
  EventStage(const config::Config& config, std::vector<StreamStats*> streams, const std::vector<std::string>& labels,
             OverlayMaker overlay, EventStats& stats, size_t capacity = 0,
             const std::map<std::string, std::vector<std::string>>& region_labels = {});
  ~EventStage();
  EventStage(const EventStage&) = delete;
  EventStage& operator=(const EventStage&) = delete;

  [[nodiscard]] bool enabled() const { return !rules_.empty(); }
  // A stream joining the run, before it starts (then packet_sink(id)). Throws vc::CantCreateError (its folder).
  void add_stream(int id, StreamStats& stats);
  // Where `stream`'s source hands its packets (empty: no clips are made for it). The sink may outlive the stage (a
  // source left behind): after finish() it drops what it gets.
  PacketSink packet_sink(int stream);
  // From the post stage's thread, for every classified frame: the rule events it causes, in order.
  std::vector<StreamEvent> on_result(const FrameResult& r, const std::shared_ptr<const Frame>& frame);
  // The stream ended (or the run stops): its open events end, its clips stop at its last packet. Idempotent.
  std::vector<StreamEvent> on_stream_end(int stream);
  // Ends what is open (those ends are not sent: call on_stream_end first for that), waits for every clip and
  // snapshot to be written. Safe to call twice.
  void finish();

 private:
  struct Open {
    RuleEvent event;
    std::string base;                   // path without extension
    std::shared_ptr<ClipWriter> clip;   // null: no clip
  };
  struct PerStream;
  struct Gate;  // what a packet sink holds: the stage while it takes packets
  struct Job {  // for the writer thread
    enum class Kind { Line, Peak, Snapshot } kind = Kind::Line;
    std::string text;                   // Line: a JSON line for events.jsonl
    std::string id, snapshot, thumbnail;
    bool last = false;                  // Snapshot: the event ended (its files are complete)
    std::shared_ptr<const Frame> frame; // Peak
    FrameResult result;
  };

  StreamEvent to_stream_event(int stream, const RuleTracker::Change& change, Open& open, const FrameResult* r);
  void on_packet(int stream, const Packet& packet);
  void start_clip(int stream, Open& open);
  void stop_clip(int stream, const std::shared_ptr<ClipWriter>& clip, int64_t until_ns);
  void close_clips(PerStream& ps);  // clips_mutex held
  void queue(Job job);
  void queue_peak(Job job);
  void work();  // the writer thread
  void write_line(int fd, const std::string& path, const std::string& line);
  void take_peak(const Job& job);
  void write_snapshot(const Job& job);
  void collect_finished_clips();
  void record(const std::string& path);
  void failed(const std::string& what);

  config::Events settings_;
  std::vector<config::EventRule> rules_;
  std::vector<StreamStats*> streams_;  // by stream id, sized for the capacity once: slots set before a stream starts
  double longest_wait_ = 0;           // the longest min_duration_s: the ring keeps that much more than pre_s
  OverlayMaker overlay_;
  EventStats& stats_;
  std::vector<std::unique_ptr<PerStream>> per_stream_;
  std::vector<std::shared_ptr<Gate>> gates_;
  std::mutex finishing_mutex_;
  std::vector<std::shared_ptr<ClipWriter>> finishing_;  // closed, being finished by their threads
  std::map<std::string, cv::Mat> peaks_;                // writer thread: each open event's best frame so far, drawn
  std::unique_ptr<Retention> retention_;                // writer thread
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Job> jobs_;
  bool stop_ = false, finished_ = false;
  std::thread thread_;  // last
};

}  // namespace vc::pipeline
