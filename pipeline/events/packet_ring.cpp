#include "pipeline/events/packet_ring.hpp"

#include <algorithm>

namespace vc::pipeline {

PacketRing::PacketRing(double keep_s, size_t max_bytes) : keep_ns_(int64_t(keep_s * 1e9)), max_bytes_(max_bytes) {}

void PacketRing::push(Packet packet) {
  std::lock_guard lock(mutex_);
  if (packets_.empty() && !packet.keyframe) return;  // a clip can only start on a keyframe
  newest_ns_ = std::max(newest_ns_, packet.pts_ns);
  bytes_ += packet.bytes;
  packets_.push_back(std::move(packet));
  trim();
}

void PacketRing::trim() {
  // Drop whole groups of pictures from the front while the next keyframe is still old enough to start any clip.
  const auto next_key = [&] {
    return std::find_if(packets_.begin() + 1, packets_.end(), [](const Packet& p) { return p.keyframe; });
  };
  for (auto key = packets_.size() > 1 ? next_key() : packets_.end(); key != packets_.end(); key = next_key()) {
    const bool old_enough = key->pts_ns >= 0 && key->pts_ns <= newest_ns_ - keep_ns_;
    if (!old_enough && bytes_ <= max_bytes_) break;
    for (auto it = packets_.begin(); it != key; ++it) bytes_ -= it->bytes;
    packets_.erase(packets_.begin(), key);
    if (packets_.size() <= 1) break;
  }
  // One group of pictures larger than the buffer: it goes too, and the next keyframe starts the ring again.
  if (bytes_ > max_bytes_) {
    overflowed_ = true;
    packets_.clear();
    bytes_ = 0;
  }
}

std::vector<Packet> PacketRing::since(int64_t from_ns) const {
  std::lock_guard lock(mutex_);
  auto start = packets_.begin();
  for (auto it = packets_.begin(); it != packets_.end(); ++it) {
    if (it->keyframe && it->pts_ns >= 0 && it->pts_ns <= from_ns) start = it;
  }
  return {start, packets_.end()};
}

size_t PacketRing::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

int64_t PacketRing::newest_ns() const {
  std::lock_guard lock(mutex_);
  return packets_.empty() ? -1 : newest_ns_;
}

void PacketRing::clear() {
  std::lock_guard lock(mutex_);
  packets_.clear();
  bytes_ = 0;
  newest_ns_ = -1;
}

bool PacketRing::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

}  // namespace vc::pipeline
