// Where the streams' frames wait for the engine (the job of DeepStream's nvstreammux): one bounded queue per
// stream, with the stream's policy when it is full — block the producer (files: back-pressure, nothing lost) or
// drop the stalest frame (live sources: the latest frame wins, drops counted) — and a batcher that takes up to
// N frames round-robin across the streams, so that no stream starves, waiting at most a timeout to fill a batch.
// With several engines (one per GPU), each stream belongs to one lane — the engine that classifies it — and each
// engine takes its batches from its own lane's streams alone.
// A stream may also be given credits: the batcher takes one per frame and the frame's consumer gives it back
// (a file's video output as it writes): a consumer that falls behind holds back its own stream, and only it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/frame.hpp"

namespace vc::pipeline {

struct QueuePolicy {
  size_t capacity = 8;
  bool drop_oldest = false;
};
// An input's queue (`live`: a camera, a network stream): a live stream keeps only the freshest frames, a file a few
// ready so that the batcher never waits on it; input.drop says otherwise.
QueuePolicy queue_policy(const config::Input& in, bool live);

class FrameHub {
 public:
  // `lanes`: how many engines take batches (every stream starts in lane 0).
  explicit FrameHub(std::vector<QueuePolicy> streams, size_t lanes = 1);

  // A stream added while the hub runs (the service's API); returns its id, the next one. The others never wait.
  // `held`: its frames queue (under its policy) but are not taken until release() — the run is not ready for them
  // yet — or are thrown away by discard() (it could not start): then the stream is as if it never was.
  int add_stream(QueuePolicy policy, bool held = false);
  void release(int stream);
  void discard(int stream);
  // A slot whose stream has ended and been reported drained, made new for another stream (as add_stream).
  void reopen(int stream, QueuePolicy policy, bool held);
  // Slots so far (ids 0 … streams()-1).
  [[nodiscard]] size_t streams() const;
  // While kept open (a service whose streams come and go), having no stream running is not the end: all_done()
  // stays false and pop_batch waits its first_wait as for frames. Off: done once every stream is closed and drained.
  void keep_open(bool open);

  // Producer side (a source's streaming thread). A blocking stream waits while its queue is full; a dropping one
  // drops its oldest frame. False when the stream is closed or the hub shut down (the frame is discarded).
  bool push(Frame frame);
  // No more frames will come from this stream (it ended or gave up). Frames already queued are still delivered.
  void close(int stream);
  // Ends everything now: producers are released, pop_batch returns what is left and then nothing.
  void shutdown();

  // Consumer side: waits for a first frame, then takes frames round-robin (one per stream per round, starting
  // after the stream served last) until `max` are taken; when fewer are waiting it waits up to `fill_timeout`
  // after the first frame for more. Empty when every stream is closed and drained, or after shutdown().
  // `first_wait` bounds the wait for the first frame (then it returns empty, so the caller can look around).
  // Only `lane`'s streams are taken.
  std::vector<Frame> pop_batch(size_t max, std::chrono::microseconds fill_timeout,
                               std::chrono::milliseconds first_wait = std::chrono::milliseconds(200), int lane = 0);
  // Every stream closed and drained: nothing more will come.
  [[nodiscard]] bool all_done() const;
  // The streams that became closed and drained since the last call (each reported once), and whether every
  // stream is now closed and drained — one step, so that a stream closing in between is never missed. `streams`:
  // those of `lane` alone; `all_done`: every lane's.
  struct Drained {
    std::vector<int> streams;
    bool all_done = false;
  };
  Drained take_drained(int lane = 0);

  // The engine that takes `stream`'s frames from now on (decided when its format is known, before its first frame).
  void set_lane(int stream, int lane);
  [[nodiscard]] int lane(int stream) const;

  // The stream's policy from now on (a source found to be live).
  void set_policy(int stream, QueuePolicy policy);
  // From now on `stream`'s frames are taken only against credits, `credits` of them to begin with.
  void set_credits(int stream, int credits);
  // A consumer is done with one of `stream`'s frames: its credit comes back.
  void give_back(int stream);

  [[nodiscard]] int64_t dropped(int stream) const;
  // Producers waiting for room in a full queue, and whether pop_batch is waiting for frames: what the tests latch
  // onto instead of sleeping.
  [[nodiscard]] int waiting_producers() const;
  [[nodiscard]] bool consumer_waiting() const;
  [[nodiscard]] size_t queued(int stream) const;
  [[nodiscard]] bool closed(int stream) const;

 private:
  struct Queue {
    QueuePolicy policy;
    std::deque<Frame> frames;
    bool closed = false;
    bool drained_reported = false;
    int64_t dropped = 0;
    int credits = -1;  // -1: no credits needed
    bool held = false;
    int lane = 0;
  };
  static bool ready(const Queue& q) { return !q.frames.empty() && q.credits != 0 && !q.held; }
  bool any_waiting() const;          // mutex held; any lane
  bool any_waiting(int lane) const;  // mutex held
  bool all_drained() const;          // mutex held
  void take_round_robin(std::vector<Frame>& batch, size_t max, int lane);  // mutex held
  void wake_all();                   // mutex held: every lane's consumer looks again

  mutable std::mutex mutex_;
  std::deque<std::condition_variable> frame_arrived_;  // one per lane
  std::condition_variable space_freed_;
  std::deque<Queue> queues_;  // (a deque: a producer waiting on its queue keeps it while streams are added)
  std::vector<size_t> next_stream_;  // per lane: where its next round starts
  bool shut_ = false;
  bool keep_open_ = false;
  int waiting_producers_ = 0;
  int consumers_waiting_ = 0;
};

}  // namespace vc::pipeline
