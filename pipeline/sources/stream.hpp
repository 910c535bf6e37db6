// One input stream and its supervisor: the thread that runs the stream's source, feeds the hub, and keeps it
// alive — a live source that fails, ends or stalls (no frame for input.stall_timeout_s; time spent waiting for room
// in a full queue, the engine's back-pressure, does not count) is restarted with
// exponential backoff up to input.reconnect.attempts times, with a stream_down event when it goes and a
// stream_up event when frames flow again; a file that loops starts again at its end; a file that fails, or that
// yields far fewer frames than it holds, ends the stream with the reason. One stream's end or failure never
// stops the others. Image inputs decode their files one by one; an undecodable image is skipped and counted.
#pragma once
#include <gst/gst.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/opened_input.hpp"
#include "pipeline/core/stats.hpp"
#include "pipeline/sources/gst_source.hpp"

namespace vc::pipeline {

// What every stream shares: where frames go, where events go, which engine classifies it, the stop request. Held
// jointly: a stream whose source will not stop is left behind by the run (runner.hpp) and may outlive it, so it
// must never point into what the run destroys.
struct StreamEnvironment {
  std::shared_ptr<FrameHub> hub;
  std::function<void(StreamEvent)> on_event;    // called from the stream's thread; may be empty
  // The engine (and GPU) for a stream whose format is now known; the same one again on every reconnect. May be empty.
  std::function<Placement(int stream, const DecodeLoad&)> place;
  std::shared_ptr<const std::atomic<bool>> stop;
  PacketSink on_packet;                         // the compressed video, for event clips and live viewers; may be empty
  std::function<bool()> packets_wanted;         // whether a raw source's packets are wanted now (empty: always)
};

// A GstContext reference held jointly (gst_context_unref when the last holder lets go).
std::shared_ptr<GstContext> share_context(GstContext* owned);

// For engines on `devices` (a CUDA device, or -1: the CPU), the CUDA context their streams' decoders share, so that
// NVDEC frames stay in GPU memory: one per GPU (two engines on one GPU share it). Null for a CPU engine, when frames
// are drawn on (`draw`: a video output), or when it cannot be made (said once; frames then go through host memory).
std::vector<std::shared_ptr<GstContext>> decoder_contexts(const std::vector<int>& devices, bool draw);

class Stream {
 public:
  // `gpu_frames`: this stream's NVDEC output may stay in GPU memory (it has no video output to draw on). `opened`: its
  // file or folder as a layer above opened it after checking it (opened_input.hpp); null: opened by its path.
  Stream(int id, config::Input input, bool gpu_frames, StreamEnvironment env,
         std::shared_ptr<const OpenedInput> opened = nullptr);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Where the source's compressed video goes (event clips, live viewers); before start(). `wanted`: whether a raw
  // source's packets (encoded for them) are wanted now; empty: always.
  void set_packet_sink(PacketSink sink, std::function<bool()> wanted = {}) {
    env_.on_packet = std::move(sink);
    env_.packets_wanted = std::move(wanted);
  }
  // Opens the source (so that a missing file or camera fails the run at once, with its message and exit code)
  // and starts supervising it on the stream's thread.
  void start();
  // Stops this stream alone (a service's API removed it): it ends as at the end of its input, reason "removed".
  void remove();
  [[nodiscard]] bool removed() const { return removed_.load(); }
  // Ends this stream with `why` as its failure (the engine that classifies it failed): as remove(), but failed.
  void abort(Failure why);
  // Waits for the stream's thread to finish (it finishes at the end of the input, on failure, or on stop).
  void join();
  // join() with a limit: false if the thread is still busy (a source that will not stop).
  bool join_for(std::chrono::milliseconds limit);
  // Whether the stream's thread has finished its work (join() would not wait); it may not be joined yet.
  [[nodiscard]] bool finished() const;

  [[nodiscard]] int id() const { return id_; }
  [[nodiscard]] const config::Input& input() const { return input_; }
  // Its regions changed while it runs (the run's table lock held: readers of input() hold it too; its own thread
  // copies its input under regions_mutex_ when it starts its source).
  void set_regions(std::vector<config::Region> regions, bool whole) {
    std::lock_guard lock(regions_mutex_);
    input_.regions = std::move(regions);
    input_.whole = whole;
  }
  [[nodiscard]] StreamStats& stats() { return stats_; }
  [[nodiscard]] const StreamStats& stats() const { return stats_; }
  // The same statistics, for readers that may outlive the stream (the service).
  [[nodiscard]] std::shared_ptr<const StreamStats> shared_stats() const { return shared_stats_; }
  [[nodiscard]] bool live() const { return stats_.live; }
  // Why the stream did not end well (set once the thread has finished): the exit code and message.
  [[nodiscard]] std::optional<Failure> failure() const;

 private:
  void supervise();
  void supervise_source();
  void supervise_images();
  // Runs the open source until it ends, fails or stalls; returns how.
  GstSource::State run_source(Failure& why);
  bool on_frame(Frame&& f);  // a source's streaming thread
  void decide_liveness();
  std::optional<std::string> damage_found();
  std::unique_ptr<GstSource> open(const std::string& image_file = {});
  bool wait_interruptibly(double seconds);  // false when stopped meanwhile
  void emit(StreamEvent::Kind kind, const std::string& reason, int64_t attempt = 0);
  void finish_with(std::optional<Failure> failure);
  bool stopping() const { return env_.stop->load() || max_reached_.load() || removed_.load(); }
  // The source the stream's thread runs (only that thread calls this), and a way to wake it from elsewhere.
  void set_source(std::unique_ptr<GstSource> source);
  void wake();

  int id_;
  config::Input input_;
  bool gpu_frames_;
  StreamEnvironment env_;
  std::shared_ptr<const OpenedInput> opened_;
  std::unique_ptr<OpenedInput> image_fd_;  // the image of an opened folder being decoded (stream thread only)
  std::shared_ptr<StreamStats> shared_stats_ = std::make_shared<StreamStats>();
  StreamStats& stats_ = *shared_stats_;
  std::vector<std::string> images_;
  std::atomic<int64_t> next_index_{0};
  std::atomic<int64_t> pass_frames_{0};   // frames of the current file pass / source run
  std::atomic<int64_t> last_pts_{-1};     // the latest frame time of this pass
  std::atomic<bool> max_reached_{false};
  std::atomic<bool> removed_{false};
  // For the stall watchdog: when the source last handed over a frame (or the run started), and whether it is
  // waiting right now for room in its full queue — back-pressure from a slow engine, not a stalled source.
  std::atomic<int64_t> progress_ns_{0};
  std::atomic<bool> waiting_for_room_{false};
  bool down_ = false;       // a live source failed and frames have not flowed since (stream thread only)
  bool live_decided_ = false;  // decide_liveness() has looked (stream thread only)
  int attempts_ = 0;        // restarts since frames last flowed
  double delay_ = 0;        // the next wait before a restart
  std::optional<Failure> failure_;
  mutable std::mutex abort_mutex_;
  std::mutex regions_mutex_;  // input_'s regions: set_regions() against the copy a (re)start takes
  std::optional<Failure> aborted_;        // abort()'s reason
  std::unique_ptr<GstSource> source_;     // used by the stream's thread only (after start())
  std::mutex wake_mutex_;
  GstBus* wake_bus_ = nullptr;            // source_'s bus (a reference): remove() posts to it (wake_mutex_)
  mutable std::mutex done_mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};


// Starts every stream, `threads` at a time (each waits on its file, network or decoder: 150 cameras one after another
// took seconds). The first failure in the list's order is thrown, as if they had started in turn; the streams started
// meanwhile run on (the caller stops them).
void start_all(std::vector<std::unique_ptr<Stream>>& streams, size_t threads);

}  // namespace vc::pipeline
