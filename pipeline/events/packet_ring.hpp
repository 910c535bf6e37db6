// A stream's recent compressed video, kept so that an event's clip can start before the event: every packet of the
// last keep_s seconds, from a keyframe (a clip must start on one), within max_bytes. Thread-safe: the source's
// thread pushes, the event stage reads.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "pipeline/sources/packets.hpp"

namespace vc::pipeline {

class PacketRing {
 public:
  PacketRing(double keep_s, size_t max_bytes);

  void push(Packet packet);
  // The packets from the last keyframe at or before `from_ns` on (from the oldest keyframe it holds, when it holds
  // none that early).
  [[nodiscard]] std::vector<Packet> since(int64_t from_ns) const;
  [[nodiscard]] size_t bytes() const;
  [[nodiscard]] int64_t newest_ns() const;  // -1 while empty
  void clear();                              // a new timeline (the source restarted): the old packets go
  // Whether a group of pictures was ever longer than max_bytes (the clip then starts later than pre_s asks).
  [[nodiscard]] bool overflowed() const;

 private:
  void trim();  // mutex held

  int64_t keep_ns_;
  size_t max_bytes_;
  mutable std::mutex mutex_;
  std::deque<Packet> packets_;
  size_t bytes_ = 0;
  int64_t newest_ns_ = -1;
  bool overflowed_ = false;
};

}  // namespace vc::pipeline
