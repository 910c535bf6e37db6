// The run's latest events, for the service (GET /api/v1/events, each stream's last event, the web page's list): a
// ring of the last N as the sinks wrote them (JSON), each with a sequence number a client asks from ("since").
// Of the rule events, "new" and "end" are kept ("update" is left out).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/core/control.hpp"
#include "pipeline/core/events.hpp"

namespace vc::pipeline {

class RecentEvents {
 public:
  explicit RecentEvents(size_t keep = 1000) : keep_(keep) {}
  // From the post stage's thread.
  void add(const StreamEvent& e);
  // The events after `since`, oldest first, at most `limit` (the latest ones), of one stream ("" = every stream) and
  // of one type ("" = every type).
  [[nodiscard]] std::vector<RecentEvent> list(const std::string& stream, const std::string& type, uint64_t since,
                                              size_t limit) const;
  // The stream's latest rule event (else its latest event of any kind); seq 0 when it has none.
  [[nodiscard]] RecentEvent last(const std::string& stream) const;
  // A new stream under that name: last() starts again (the list keeps what the earlier one did).
  void forget_last(const std::string& stream);

 private:
  size_t keep_;
  mutable std::mutex mutex_;
  std::deque<RecentEvent> ring_;
  uint64_t seq_ = 0;
  std::map<std::string, RecentEvent> last_rule_, last_any_;  // by stream
};

}  // namespace vc::pipeline
