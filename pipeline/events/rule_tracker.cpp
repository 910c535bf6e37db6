#include "pipeline/events/rule_tracker.hpp"

#include <algorithm>

namespace vc::pipeline {
namespace {

int64_t ns(double seconds) { return int64_t(seconds * 1e9); }

}  // namespace

RuleTracker::RuleTracker(config::EventRule rule, double release_s, double update_s, std::string region)
    : rule_(std::move(rule)), region_(std::move(region)), release_ns_(ns(release_s)), update_ns_(ns(update_s)) {}

bool RuleTracker::holds(const FrameResult& r) const {
  if (!r.finite || r.uncertain || r.smoothed.index < 0 || r.smoothed.score < rule_.min_confidence) return false;
  return std::any_of(rule_.labels.begin(), rule_.labels.end(), [&](const std::string& l) { return l == "*" || l == r.smoothed.label; });
}

RuleTracker::Change RuleTracker::end(int64_t end_ns, const char* reason, int64_t cooldown_from_ns) {
  event_.end_ns = end_ns;
  event_.reason = reason;
  state_ = State::Cooldown;
  since_ns_ = cooldown_from_ns + ns(rule_.cooldown_s);
  return {"end", event_};
}

std::optional<RuleTracker::Change> RuleTracker::update(const FrameResult& r, int64_t t) {
  const bool now = holds(r);
  if (t < last_t_) {  // the timeline started again (the source restarted): what was open ends where it was
    const int64_t before = last_t_;
    last_t_ = t;
    if (open()) {
      auto change = end(state_ == State::Releasing ? since_ns_ : before, "stream restarted", t);
      state_ = State::Idle;
      return change;
    }
    state_ = State::Idle;
  }
  last_t_ = t;
  switch (state_) {
    case State::Cooldown:
      if (t < since_ns_) return std::nullopt;
      state_ = State::Idle;
      [[fallthrough]];
    case State::Idle:
      if (!now) return std::nullopt;
      state_ = State::Pending;
      since_ns_ = t;
      event_ = {};
      event_.rule = rule_.name;
      event_.region = region_;
      event_.start_ns = t;
      [[fallthrough]];
    case State::Pending:
      if (!now) {
        state_ = State::Idle;
        return std::nullopt;
      }
      if (r.smoothed.score > event_.peak_score) {
        event_.peak_score = r.smoothed.score;
        event_.peak_frame = r.frame;
        event_.peak_ns = t;
        event_.label = r.smoothed.label;
      }
      if (t - since_ns_ < ns(rule_.min_duration_s)) return std::nullopt;
      state_ = State::Open;
      last_message_ns_ = t;
      last_message_peak_ = event_.peak_score;
      return Change{"new", event_};
    case State::Open:
    case State::Releasing: {
      if (now) {
        state_ = State::Open;
        if (r.smoothed.score > event_.peak_score) {
          event_.peak_score = r.smoothed.score;
          event_.peak_frame = r.frame;
          event_.peak_ns = t;
          event_.label = r.smoothed.label;
        }
      } else if (state_ == State::Open) {
        state_ = State::Releasing;
        since_ns_ = t;
      }
      if (state_ == State::Releasing && t - since_ns_ >= release_ns_) return end(since_ns_, "released", since_ns_);
      if (t - event_.start_ns >= ns(rule_.max_duration_s)) return end(t, "max_duration", t);
      const bool risen = event_.peak_score >= last_message_peak_ + 0.1f;
      if (t - last_message_ns_ >= update_ns_ || risen) {
        last_message_ns_ = t;
        last_message_peak_ = event_.peak_score;
        return Change{"update", event_};
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<RuleTracker::Change> RuleTracker::stream_ended(int64_t t) {
  if (!open()) return std::nullopt;
  return end(state_ == State::Releasing ? since_ns_ : t, "stream ended", t);
}

}  // namespace vc::pipeline
