// The CUDA preprocessing: a batch of frames (RGB/BGR/RGBA/BGRx/NV12/I420, any size and stride, any mix of
// formats, in host or device memory) to normalized NHWC FP16 at the model's input size — one kernel launch per
// pixel format in the batch. Follows exactly the rules in preprocess.hpp; the CPU reference there is its oracle.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <span>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/preprocess_kernels.hpp"
#include "inference/preprocess.hpp"

namespace vc::inference {

// Owns the staging memory, in `slots` independent sets so that a new batch can be staged while the previous
// one is still being read on the GPU. Host frames are copied through pinned memory to the device (async, on
// `stream`); device frames are read where they are. Staging is sized at construction and grows only when a
// batch larger than any before arrives.
class GpuPreprocessor {
 public:
  GpuPreprocessor(const PreprocessParams& params, int max_batch, cudaStream_t stream, int slots = 1,
                  size_t reserve_frame_bytes = 0);

  // Enqueues the preprocessing of `frames` into `out` (frames.size() images) using staging slot `slot`. Waits
  // only if the slot's previous batch has not yet been read by the GPU. The frames' memory must stay valid
  // until the work enqueued here has completed (record an event on stream() after it).
  void run(std::span<const FrameView> frames, __half* out, int slot = 0);

  [[nodiscard]] const PreprocessParams& params() const { return params_; }
  [[nodiscard]] cudaStream_t stream() const { return stream_; }
  [[nodiscard]] size_t staging_bytes() const;

 private:
  struct Slot {
    PinnedBuffer<uint8_t> pinned_frames;
    DeviceBuffer<uint8_t> device_frames;
    PinnedBuffer<GpuFrameDesc> pinned_descs;
    DeviceBuffer<GpuFrameDesc> device_descs;
    CudaEvent consumed;  // the GPU has read everything staged in this slot
    bool used = false;
  };

  PreprocessParams params_;
  int max_batch_;
  cudaStream_t stream_;
  std::vector<Slot> slots_;
};

}  // namespace vc::inference
