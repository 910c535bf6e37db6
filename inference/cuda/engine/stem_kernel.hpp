// The fused ResNet stem: 7x7 stride-2 pad-3 convolution (BatchNorm folded) + bias + ReLU + 3x3 stride-2 pad-1
// max-pool in one kernel, FP16 NHWC in, FP16 NHWC out (FP32 out for tests), FP32-level accuracy on Tensor
// Cores (sm_80+). C++17: included by CUDA code. The engine (cudnn_engine.cpp) runs it for `precision strict`.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <string>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"

namespace vc::inference {

// The geometry the kernel implements (every ResNet's stem); any other stem takes the cuDNN path.
inline constexpr int kStemKernel = 7, kStemStride = 2, kStemPad = 3;
inline constexpr int kStemPoolKernel = 3, kStemPoolStride = 2, kStemPoolPad = 1;
inline constexpr int kStemMaxInChannels = 4;

// Output extents of the convolution and of the pool for an input extent (height or width).
constexpr int stem_conv_extent(int input) { return (input + 2 * kStemPad - kStemKernel) / kStemStride + 1; }
constexpr int stem_pool_extent(int input) {
  return (stem_conv_extent(input) + 2 * kStemPoolPad - kStemPoolKernel) / kStemPoolStride + 1;
}

// "" when the fused stem can run on GPU `device` for these channel counts, else why not (compute capability
// below 8.0, no sm_80+ code in this build, channel counts). Never throws.
std::string fused_stem_unsupported(int device, int in_channels, int out_channels);

// The stem's weights prepared once for the kernel, on the current device: each weight, scaled by a power of
// two per output channel, is split into hi + lo FP16 halves in the Tensor Cores' fragment order
// (stem_kernel.cu says why). Move-only (owns device memory). Throws InternalError for bad shapes,
// UnavailableError without memory.
class FusedStemWeights {
 public:
  // weight: OHWI [out][7][7][in] FP32, bias: [out] FP32 (host memory).
  FusedStemWeights(const std::vector<float>& weight, const std::vector<float>& bias, int in_channels,
                   int out_channels);

  [[nodiscard]] int in_channels() const { return in_channels_; }
  [[nodiscard]] int out_channels() const { return out_channels_; }
  [[nodiscard]] size_t bytes() const { return fragments_.bytes() + scale_bias_.bytes(); }
  [[nodiscard]] const uint4* fragments() const { return fragments_.get(); }
  [[nodiscard]] const float* scale_bias() const {
    return scale_bias_.get();
  }  // [out] 2^-scale, then [out] bias
  [[nodiscard]] int device() const { return device_; }
  [[nodiscard]] int multiprocessors() const { return multiprocessors_; }
  [[nodiscard]] size_t max_shared_bytes() const { return max_shared_bytes_; }
  // Resident CTAs per SM for a channel block of `block_channels` (8..64, a multiple of 8), measured at set-up
  // so that a launch makes no CUDA query (it may be captured in a graph); 0 if that configuration does not
  // fit.
  [[nodiscard]] int ctas_per_sm(bool fp32_output, int block_channels) const {
    return ctas_per_sm_[size_t(fp32_output) * 8 + size_t(block_channels / 8 - 1)];
  }

 private:
  int in_channels_, out_channels_;
  int device_ = 0, multiprocessors_ = 0;
  size_t max_shared_bytes_ = 0;
  std::array<int, 16> ctas_per_sm_{};
  DeviceBuffer<uint4> fragments_;
  DeviceBuffer<float> scale_bias_;
};

// out = maxpool3x3s2p1(relu(conv7x7s2p3(in) + bias)): in is batch x height x width x in_channels FP16 (NHWC),
// out is batch x stem_pool_extent(height) x stem_pool_extent(width) x out_channels (NHWC, 16-byte aligned).
// Asynchronous on `stream`; allocates nothing, so it can be captured in a CUDA graph. Throws InternalError
// for bad arguments or an unsupported device.
void launch_fused_stem(const __half* in, int batch, int height, int width, const FusedStemWeights& weights,
                       __half* out, cudaStream_t stream);
// The same with the FP32 result before the FP16 rounding (tests compare it with the CPU reference).
void launch_fused_stem(const __half* in, int batch, int height, int width, const FusedStemWeights& weights,
                       float* out, cudaStream_t stream);

}  // namespace vc::inference
