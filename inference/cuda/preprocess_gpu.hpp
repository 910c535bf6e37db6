// The CUDA preprocessing: a batch of frames (RGB/BGR/RGBA/BGRx/NV12/I420, any size and stride) to normalized
// NHWC FP16 at the model's input size, in one launch. Follows exactly the rules in preprocess.hpp; the CPU
// reference there is its oracle.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <span>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"
#include "inference/preprocess.hpp"
#include "inference/cuda/preprocess_kernels.hpp"

namespace vc::inference {

// Owns the staging memory: copies host frames through pinned buffers to the device (async, on `stream`)
// and launches the kernel. Staging grows only when a frame larger than any before arrives.
class GpuPreprocessor {
 public:
  GpuPreprocessor(const PreprocessParams& params, int max_batch, cudaStream_t stream, size_t reserve_frame_bytes = 0);

  // Frames in host memory.
  void run(std::span<const FrameView> host_frames, __half* out);
  // Frames already in device memory.
  void run_device(std::span<const FrameView> device_frames, __half* out);

  [[nodiscard]] const PreprocessParams& params() const { return params_; }
  [[nodiscard]] size_t staging_bytes() const { return device_frames_.bytes(); }

 private:
  void upload_descs(std::span<const FrameView> device_views);

  PreprocessParams params_;
  int max_batch_;
  cudaStream_t stream_;
  PinnedBuffer<uint8_t> pinned_frames_;
  DeviceBuffer<uint8_t> device_frames_;
  PinnedBuffer<GpuFrameDesc> pinned_descs_;
  DeviceBuffer<GpuFrameDesc> device_descs_;
  CudaEvent staging_free_;  // the last upload from pinned_frames_ has finished
  bool staging_used_ = false;
};

}  // namespace vc::inference
