// One rule watching one stream: it opens an event when the rule starts to hold — the smoothed label one of its
// labels, at min_confidence at least — and has held for min_duration_s; it ends the event once the rule has not held
// for release_s (hysteresis: a flickering frame does not split one event into ten) or the event has lasted
// max_duration_s; after an end, no new event for cooldown_s. Times are the stream's own (frame timestamps); a time
// earlier than the last (the source restarted) ends an open event and starts afresh.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "pipeline/core/events.hpp"

namespace vc::pipeline {

class RuleTracker {
 public:
  // `region`: the region whose results it watches ("" = the whole picture's).
  RuleTracker(config::EventRule rule, double release_s, double update_s, std::string region = "");

  // What a frame's result does to the rule: nothing, or a transition of its event — "new" (it opened), "update"
  // (it goes on: every update_s, and when its peak has risen by a tenth since the last message) or "end".
  // `t_ns`: the frame's time on the stream's timeline.
  struct Change {
    std::string type;  // "new", "update", "end"
    RuleEvent event;   // its fields as far as the tracker knows them (no id, times of day or files)
  };
  std::optional<Change> update(const FrameResult& r, int64_t t_ns);
  // The stream ended at `t_ns`: an open event ends.
  std::optional<Change> stream_ended(int64_t t_ns);

  [[nodiscard]] bool open() const { return state_ == State::Open || state_ == State::Releasing; }
  // Holding, not yet for min_duration_s: the event may open.
  [[nodiscard]] bool pending() const { return state_ == State::Pending; }
  // The frame with the highest score so far (pending or open).
  [[nodiscard]] int64_t peak_frame() const { return event_.peak_frame; }
  [[nodiscard]] const config::EventRule& rule() const { return rule_; }
  [[nodiscard]] const std::string& region() const { return region_; }

 private:
  enum class State { Idle, Pending, Open, Releasing, Cooldown };
  bool holds(const FrameResult& r) const;
  Change end(int64_t end_ns, const char* reason, int64_t cooldown_from_ns);

  config::EventRule rule_;
  std::string region_;
  int64_t release_ns_, update_ns_;
  State state_ = State::Idle;
  int64_t last_t_ = INT64_MIN;  // the last frame's time: one earlier means a new timeline
  int64_t since_ns_ = 0;        // Pending: since it holds; Releasing: since it stopped holding; Cooldown: until
  int64_t last_message_ns_ = 0;
  float last_message_peak_ = 0;
  RuleEvent event_;
};

}  // namespace vc::pipeline
