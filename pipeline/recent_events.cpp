#include "pipeline/recent_events.hpp"

#include <algorithm>

#include "pipeline/results/results.hpp"

namespace vc::pipeline {

void RecentEvents::add(const StreamEvent& e) {
  if (e.kind == StreamEvent::Kind::Rule && e.rule.type == "update") return;
  RecentEvent r;
  r.stream = e.stream_name;
  r.type = event_name(e.kind);
  r.json = to_json(e);
  std::lock_guard lock(mutex_);
  r.seq = ++seq_;
  if (e.kind == StreamEvent::Kind::Rule) last_rule_[r.stream] = r;
  last_any_[r.stream] = r;
  ring_.push_back(std::move(r));
  while (ring_.size() > keep_) ring_.pop_front();
}

std::vector<RecentEvent> RecentEvents::list(const std::string& stream, const std::string& type, uint64_t since,
                                            size_t limit) const {
  std::vector<RecentEvent> out;
  std::lock_guard lock(mutex_);
  for (auto it = ring_.rbegin(); it != ring_.rend() && out.size() < limit && it->seq > since; ++it) {
    if ((stream.empty() || it->stream == stream) && (type.empty() || it->type == type)) out.push_back(*it);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

RecentEvent RecentEvents::last(const std::string& stream) const {
  std::lock_guard lock(mutex_);
  if (auto it = last_rule_.find(stream); it != last_rule_.end()) return it->second;
  if (auto it = last_any_.find(stream); it != last_any_.end()) return it->second;
  return {};
}

void RecentEvents::forget_last(const std::string& stream) {
  std::lock_guard lock(mutex_);
  last_rule_.erase(stream);
  last_any_.erase(stream);
}

}  // namespace vc::pipeline
