// What the pipeline tells the world about each frame and each stream: the per-frame result, the events (label
// changes, a stream going down, coming back, ending), and the interface of the sinks that take them (results/:
// JSON lines, MQTT). Every sink gets the same results and the same events, in order per stream, from one thread.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "inference/postprocess.hpp"
#include "inference/preprocess.hpp"

namespace vc::pipeline {

struct StageTimes {
  double queue_ms = 0;      // capture -> taken into a batch
  double inference_ms = 0;  // batch taken -> logits back (preprocess + inference, two batches in flight)
  double post_ms = 0;       // logits back -> result written
};

struct FrameResult {
  int stream = 0;
  std::string stream_name;
  std::string region;       // "" = the whole picture; else the region of it this result is for
  inference::CropBox box;   // a region's box in the picture as shown, in pixels (empty for the whole picture)
  std::string model;        // the model that classified it ("default" = model:)
  std::string model_id;     // and which weights: "NAME@" and the start of their SHA-256 (the name alone when unknown)
  std::string source;       // the input (file, URI, device) or, for images, the image's file
  int64_t frame = 0;
  int64_t pts_ns = -1;
  int64_t captured_ns = 0;  // steady-clock time the frame was received
  std::vector<inference::Prediction> top;
  inference::Prediction smoothed;  // index -1 when there is none (images are not smoothed)
  bool uncertain = false;
  bool finite = true;       // false: the logits held NaN/Inf (the scores are meaningless)
  bool damaged = false;     // decoded from damaged data (a corrupt frame, or the first after a decode error)
  bool still_image = false; // one of an image input's images (no timeline, no smoothing)
  double latency_ms = 0;    // capture -> result
  StageTimes stages;
};

// An event a rule opened (pipeline/events/): what was seen, when, how surely, and where its clip and snapshot are.
// Sent when it opens ("new"), while it lasts ("update") and when it ends ("end").
struct RuleEvent {
  std::string type;           // "new", "update", "end"
  std::string id;             // unique: STREAM-RULE-START(UTC)-N
  std::string rule, label;    // the rule; the label at the peak
  std::string region;         // the region it watched ("" = the whole picture)
  int64_t start_ns = -1;      // on the stream's timeline (pts), when the rule started to hold
  int64_t end_ns = -1;        // when it stopped holding (-1 while open)
  std::string start_time;     // wall clock, ISO 8601 UTC
  std::string end_time;       // "" while open
  float peak_score = 0;       // the highest smoothed score while it held
  int64_t peak_frame = -1;
  int64_t peak_ns = -1;
  std::string clip, snapshot, thumbnail;  // files ("" when none is made); the clip grows until post_s after the end
  int64_t clip_start_ns = -1; // the stream time of the clip's time 0 (its timestamps + this = the stream's)
  std::string reason;         // "end": why it ended ("released", "max_duration", "stream ended")
};

struct StreamEvent {
  enum class Kind { LabelChange, StreamDown, StreamUp, StreamEnd, Rule };
  Kind kind = Kind::LabelChange;
  int stream = 0;
  std::string stream_name;
  std::string region;               // label_change, rule: the region ("" = the whole picture)
  std::string source;
  int64_t frame = -1;
  int64_t pts_ns = -1;
  std::optional<std::string> from;  // label_change: previous label (none at the first)
  std::string to;                   // label_change: new label
  std::string reason;               // stream_down / stream_end: why ("end of file", the error)
  int64_t attempt = 0;              // stream_down: the restart attempt about to be made
  RuleEvent rule;                   // rule: the event
};

constexpr const char* event_name(StreamEvent::Kind k) {
  switch (k) {
    case StreamEvent::Kind::LabelChange: return "label_change";
    case StreamEvent::Kind::StreamDown: return "stream_down";
    case StreamEvent::Kind::StreamUp: return "stream_up";
    case StreamEvent::Kind::StreamEnd: return "stream_end";
    case StreamEvent::Kind::Rule: return "rule";
  }
  return "?";
}

// A consumer of results and events. Called from one thread. A sink that cannot do its job without losing data
// that it was asked to keep (a results file on a full disk) throws vc::IoError; a best-effort sink (MQTT)
// counts what it dropped instead.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void frame(const FrameResult& r) = 0;
  virtual void event(const StreamEvent& e) = 0;
  // A stream joined the run (before any of its results), or left it (after its last): per-stream files open and
  // close. From the post stage's thread, as frame() and event().
  virtual void add_stream(int /*stream*/, const std::string& /*name*/) {}
  virtual void end_stream(int /*stream*/) {}
  // Writes out what is pending; after close() nothing more is accepted. Throws vc::IoError.
  virtual void close() = 0;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual int64_t dropped() const { return 0; }
  // Whether it can deliver now (a broker connection is up); thread-safe.
  [[nodiscard]] virtual bool healthy() const { return true; }
};

struct SinkStatus {
  std::string name;
  int64_t dropped = 0;
  bool healthy = true;
};

}  // namespace vc::pipeline
