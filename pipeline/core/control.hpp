// What a running pipeline shows the layers above it (service/: metrics, health, the REST API and the web page), and
// what it lets them do: add and remove streams, look at a stream's latest labelled frame, read the latest events. The
// pipeline owns this interface and implements it (runner.hpp); nothing in pipeline/ knows who calls it. Every call is
// thread-safe: the service calls from its own threads while the run goes on.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "pipeline/core/events.hpp"
#include "pipeline/core/opened_input.hpp"
#include "pipeline/core/stats.hpp"

namespace vc::pipeline {

// A request the run turns down, with the HTTP status that says why: 404 no such stream, 409 the name is in use,
// 503 the run is full or stopping.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  [[nodiscard]] int status() const noexcept { return status_; }

 private:
  int status_;
};

// A stream's latest labelled frame (pipeline/snapshots.hpp): the JPEG and what it shows.
struct Snapshot {
  std::string jpeg;
  std::string label;  // the frame's top-1, as its overlay's headline
  float score = 0;
  int64_t frame = -1;
  double pts_s = -1;  // its stream time (s); -1 when it has none
};

// One of the run's latest events (pipeline/recent_events.hpp).
struct RecentEvent {
  uint64_t seq = 0;        // 1, 2, … in the order they happened
  std::string stream;      // the stream's name
  std::string type;        // "label_change", "stream_down", "stream_up", "stream_end", "rule"
  std::string json;        // the event's line, as in the results
};

// One engine of the run (several with inference.gpus: one per GPU entry).
struct EngineInfo {
  int engine = 0;
  int gpu = -1;              // its CUDA device; -1 for the CPU engine
  std::string name;          // "cuDNN on NVIDIA H200"
  const EngineStats* stats;  // valid as long as the run
  std::string failure;       // why it failed ("" while it works): its streams failed with it
};

// A model's weights as the run has had them.
struct ModelVersion {
  std::string id;        // "NAME@" and the start of the weights' SHA-256: what the results lines carry as "model"
  std::string weights;   // the file, as it was given
  std::string deployed;  // when it took over (UTC, ISO 8601); the run's start for the first
};

// A model of the run (model: is "default"; models: the others the streams use).
struct ModelView {
  std::string name;
  ModelVersion current;
  std::vector<std::string> labels;
  std::vector<ModelVersion> history;  // the weights it had before, newest first (at most 10)
  bool can_roll_back = false;         // the one before is still built (history.front())
  bool tuned = true;                  // false while engines that started untuned run (inference.tune_in_background)
  double tuned_after_s = 0;           // when the tuned engines took over, in seconds after the run was set up (0: never
                                      // needed)
};

// A viewer of a stream's live video (pipeline/live/live_feed.hpp): handed, on the muxer's thread (must not block),
// the bytes of a fragmented MP4 — the init segment, then fragments — and whether a fragment starts with a keyframe.
// send() says false once the viewer has gone; end(): nothing more comes (the stream ended, or its video changed
// format: a viewer starts again).
struct LiveViewer {
  std::function<bool(const std::string& bytes, bool keyframe)> send;
  std::function<void()> end;
};

class RunControl {
 public:
  virtual ~RunControl() = default;

  // Every stream of the run, in order (removed and ended ones too). A stream's statistics stay valid as long as the
  // pointer is held.
  [[nodiscard]] virtual std::vector<std::shared_ptr<const StreamStats>> streams() const = 0;
  // Batches, batch sizes, engine time per batch, readiness: of the first engine (the only one but with inference.gpus).
  [[nodiscard]] virtual const EngineStats& engine() const = 0;
  // Every engine, the first being engine()'s.
  [[nodiscard]] virtual std::vector<EngineInfo> engines() const { return {{0, cuda_device(), engine_name(), &engine(), ""}}; }
  // Each result sink's drops and connection.
  [[nodiscard]] virtual std::vector<SinkStatus> sinks() const = 0;
  // The event rules' counters; null when the run has no rules.
  [[nodiscard]] virtual const EventStats* events() const = 0;
  // "cuDNN (NVIDIA H200)", "CPU reference"
  [[nodiscard]] virtual std::string engine_name() const = 0;
  // The GPU the engine runs on, -1 for the CPU engine.
  [[nodiscard]] virtual int cuda_device() const = 0;

  // The run's effective configuration (the model card's values merged in).
  [[nodiscard]] virtual const config::Config& config() const = 0;
  // The streams that have not ended or been removed, as configured (what a state file keeps).
  [[nodiscard]] virtual std::vector<config::Input> inputs() const = 0;
  // Starts a stream (checked with config::validate_stream already) without pausing the others; it joins the batcher.
  // `opened`: its file or folder, opened by the caller after checking it (read from there, never by its path); may
  // be null. Throws RequestError (name in use, run full or stopping) or vc::Error (it cannot start: its message).
  virtual void add_stream(const config::Input& input, std::shared_ptr<const OpenedInput> opened) = 0;
  // Stops a stream, lets its frames in flight through and finalizes its outputs and results, then lets go of it (its
  // thread joined, its statistics out of the lists, a compact row kept for the summary); returns when that is done (or
  // after `wait`, false: it is let go of once done). A stream that has ended or failed is let go of at once. Throws
  // RequestError 404 for a name the run does not have (or is removing already).
  virtual bool remove_stream(const std::string& name, std::chrono::milliseconds wait) = 0;
  // The stream's latest labelled frame as JPEG (snapshots.hpp); empty when it has had none. Throws RequestError 404
  // for an unknown name. `clean`: without the overlay. `crop`: the frame without the overlay cut to that box (its
  // pixels), full resolution, as a training image (empty as well when the box is outside it).
  virtual std::optional<Snapshot> snapshot(const std::string& name, int max_width, std::chrono::milliseconds wait,
                                           bool clean, const config::PixelBox* crop = nullptr) = 0;
  // The latest events (recent_events.hpp).
  [[nodiscard]] virtual std::vector<RecentEvent> recent_events(const std::string& stream, const std::string& type,
                                                               uint64_t since, size_t limit) const = 0;
  [[nodiscard]] virtual RecentEvent last_event(const std::string& stream) const = 0;
  // A stream's regions as they are now (`input` with its regions and `whole`), and the picture size they apply to
  // (0x0 before its first frame). Throws RequestError 404 for an unknown name.
  struct Regions {
    config::Input input;
    int width = 0, height = 0;
  };
  [[nodiscard]] virtual Regions regions(const std::string& name) const {
    throw RequestError(404, "no stream is named '" + name + "'");
  }
  // Replaces a running stream's regions (and `whole`) from its next batch on, without restarting it. Throws
  // RequestError 404 (no such stream), vc::ConfigError (a box outside its picture, a model the run has not loaded).
  virtual void set_regions(const std::string& name, const config::Input& /*with_regions*/) {
    throw RequestError(404, "no stream is named '" + name + "'");
  }

  // The run's models, in the order the engines hold them.
  [[nodiscard]] virtual std::vector<ModelView> models() const { return {}; }
  // Builds model `name` from `weights` (read through `opened` when given: the file the caller checked) beside the
  // running engines — its configured keys as they are, the new file's card for the rest — then has every engine
  // switch to it between two batches: no frame dropped, none classified twice, no stream restarted; the results from
  // then on carry its id. Returns once every engine has switched. The model it replaces stays built for
  // roll_back_model. Throws RequestError (404 no such model in the run; 409 another deploy is under way or an engine
  // has failed; 503 the run is stopping), vc::Error (it does not build, or lacks a label a rule watches: the running
  // model goes on, untouched).
  virtual ModelView deploy_model(const std::string& name, const std::string& /*weights*/,
                                 std::shared_ptr<const OpenedInput> /*opened*/) {
    throw RequestError(404, "no model is named '" + name + "'");
  }
  // Switches model `name` back to the weights it had before the last deploy (and those become the ones to go back
  // to). Throws RequestError 404, 409 (nothing to go back to, a deploy under way), 503.
  virtual ModelView roll_back_model(const std::string& name) {
    throw RequestError(404, "no model is named '" + name + "'");
  }

  // The live view (with api.enabled): a viewer of a stream's own video remuxed, never encoded (a raw source is encoded
  // once, while watched); it watches as long as the handle is held, `session` says which run of the stream's muxer it
  // sees. Throws RequestError 404 (no such stream), 415 (its codec cannot go into MP4), 503 (it has ended).
  [[nodiscard]] virtual std::shared_ptr<void> watch_video(const std::string& name, LiveViewer /*viewer*/,
                                                          uint64_t& /*session*/) {
    throw RequestError(404, "no stream is named '" + name + "'");
  }
  // A subscriber to a stream's results lines as they come (each with "live": its frame's place in the live video,
  // while watched): `send(line)` on the post stage's thread, must not block, false once gone; `end()` when the stream
  // ends. Throws RequestError 404.
  [[nodiscard]] virtual std::shared_ptr<void> watch_results(const std::string& name,
                                                            std::function<bool(const std::string&)> /*send*/,
                                                            std::function<void()> /*end*/) {
    throw RequestError(404, "no stream is named '" + name + "'");
  }
};

}  // namespace vc::pipeline
