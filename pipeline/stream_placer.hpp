// Places each stream of a run on an engine once its format is known (batching/gpu_assignment.hpp), and tells the
// batcher which lane its frames go to. Held jointly with the streams, as the event gate is.
#pragma once
#include <memory>
#include <vector>

#include "pipeline/batching/frame_hub.hpp"
#include "pipeline/batching/gpu_assignment.hpp"
#include "pipeline/sources/gst_source.hpp"

namespace vc::pipeline {

class StreamPlacer {
 public:
  StreamPlacer(std::shared_ptr<FrameHub> hub, std::vector<int> devices, std::vector<std::shared_ptr<GstContext>> contexts)
      : hub_(std::move(hub)), assignment_(std::move(devices)), contexts_(std::move(contexts)) {}
  Placement place(int stream, const DecodeLoad& load) {
    const auto p = assignment_.place(stream, load);
    hub_->set_lane(stream, p.lane);  // before its first frame: it is queued for that engine
    return {p.lane, p.device, contexts_[size_t(p.lane)]};
  }
  GpuAssignment& assignment() { return assignment_; }

 private:
  std::shared_ptr<FrameHub> hub_;
  GpuAssignment assignment_;
  std::vector<std::shared_ptr<GstContext>> contexts_;  // per engine (null: its frames go through host memory)
};

}  // namespace vc::pipeline
