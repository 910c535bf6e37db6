#include "pipeline/batching/gpu_assignment.hpp"

#include <algorithm>
#include <stdexcept>

namespace vc::pipeline {

double decode_cost(const DecodeLoad& load) {
  const double pixels = double(load.width > 0 ? load.width : 1920) * double(load.height > 0 ? load.height : 1080);
  const double fps = load.fps > 0 ? load.fps : 30.0;
  // NVIDIA's NVDEC table: per engine, 1080p H.264 ~770 fps, H.265 ~1,300 fps, AV1 and VP9 about as H.265.
  double weight = 1.0;
  if (load.codec.empty()) weight = 0.05;  // raw video: no decoding, only the copy
  else if (load.codec == "H.265" || load.codec == "AV1" || load.codec == "VP9") weight = 0.6;
  return weight * pixels * fps / (1920.0 * 1080.0 * 30.0);
}

GpuAssignment::GpuAssignment(std::vector<int> devices) : devices_(std::move(devices)), loads_(devices_.size()) {
  if (devices_.empty()) throw std::invalid_argument("GpuAssignment: no engine");
}

GpuAssignment::Place GpuAssignment::place(int stream, const DecodeLoad& load) {
  std::lock_guard lock(mutex_);
  if (const auto it = placed_.find(stream); it != placed_.end()) {
    if (!loads_[size_t(it->second.first)].retired) return {it->second.first, devices_[size_t(it->second.first)]};
    auto& old = loads_[size_t(it->second.first)];  // its engine failed since: placed again, on a working one
    old.load = std::max(0.0, old.load - it->second.second);
    --old.streams;
    placed_.erase(it);
  }
  const bool all_retired = std::all_of(loads_.begin(), loads_.end(), [](const LaneLoad& l) { return l.retired; });
  size_t best = loads_.size();
  for (size_t i = 0; i < loads_.size(); ++i) {
    const auto& a = loads_[i];
    if (a.retired && !all_retired) continue;
    if (best == loads_.size()) {
      best = i;
      continue;
    }
    const auto& b = loads_[best];
    if (a.load < b.load - 1e-9 || (a.load <= b.load + 1e-9 && a.streams < b.streams)) best = i;
  }
  const double cost = decode_cost(load);
  loads_[best].load += cost;
  ++loads_[best].streams;
  placed_[stream] = {int(best), cost};
  return {int(best), devices_[best]};
}

void GpuAssignment::release(int stream) {
  std::lock_guard lock(mutex_);
  const auto it = placed_.find(stream);
  if (it == placed_.end()) return;
  auto& lane = loads_[size_t(it->second.first)];
  lane.load = std::max(0.0, lane.load - it->second.second);
  --lane.streams;
  placed_.erase(it);
}

void GpuAssignment::retire(int lane) {
  std::lock_guard lock(mutex_);
  loads_.at(size_t(lane)).retired = true;
}

std::optional<GpuAssignment::Place> GpuAssignment::placed(int stream) const {
  std::lock_guard lock(mutex_);
  const auto it = placed_.find(stream);
  if (it == placed_.end()) return std::nullopt;
  return Place{it->second.first, devices_[size_t(it->second.first)]};
}

std::vector<GpuAssignment::LaneLoad> GpuAssignment::loads() const {
  std::lock_guard lock(mutex_);
  return loads_;
}

}  // namespace vc::pipeline
