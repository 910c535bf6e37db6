// The preprocessing kernel's launcher (C++17: included by CUDA code). GpuPreprocessor (preprocess_gpu.hpp)
// is the host side that stages frames and calls it.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "inference/preprocess.hpp"

namespace vc::inference {

// A frame whose planes are in device memory, with its resize geometry (computed on the host).
struct GpuFrameDesc {
  FrameView view;
  ResizeGeometry geometry;
  int out_index = 0;  // which image of the output batch this frame fills
};

// Launches the kernel for `n` frames described by `descs` (a device array; all frames one format); frame i
// fills image descs[i].out_index of `out` (a batch of size x size x channels images). Asynchronous on `stream`.
void launch_preprocess(const GpuFrameDesc* descs, int n, PixelFormat format, const PreprocessParams& p, __half* out,
                       cudaStream_t stream);

}  // namespace vc::inference
