#include "inference/cuda/engine_kernels.hpp"

#include <cfloat>

#include "inference/cuda/cuda_check.hpp"

namespace vc::inference {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(size_t work) { return unsigned((work + kThreads - 1) / kThreads); }

__global__ void half_to_float_kernel(const __half* __restrict__ in, float* __restrict__ out, size_t count) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __half2float(in[i]);
}

// One thread per output element; consecutive threads take consecutive channels, so loads are coalesced.
__global__ void max_pool_kernel(const float* __restrict__ in, int n, int h, int w, int c, int k, int s, int pad,
                                int oh, int ow, __half* __restrict__ out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * oh * ow * c) return;
  const int ch = int(i % c);
  const int x = int((i / c) % ow), y = int((i / c / ow) % oh), b = int(i / c / ow / oh);
  float m = -FLT_MAX;
  for (int ky = 0; ky < k; ++ky) {
    const int iy = y * s - pad + ky;
    if (iy < 0 || iy >= h) continue;
    for (int kx = 0; kx < k; ++kx) {
      const int ix = x * s - pad + kx;
      if (ix < 0 || ix >= w) continue;
      m = fmaxf(m, in[((size_t(b) * h + iy) * w + ix) * c + ch]);
    }
  }
  out[i] = __float2half_rn(m);
}

__global__ void global_avg_pool_kernel(const __half* __restrict__ in, int n, int hw, int c, float* __restrict__ out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= size_t(n) * c) return;
  const int ch = int(i % c), b = int(i / c);
  const __half* p = in + size_t(b) * hw * c + ch;
  float sum = 0.f;
  for (int j = 0; j < hw; ++j) sum += __half2float(p[size_t(j) * c]);
  out[i] = sum / float(hw);
}

// One warp per (output feature, group of kRows images): the weight row is read once per group, the dot
// products are reduced with shuffles. Plain FP32 FMA: no Tensor Cores, no TF32.
constexpr int kRows = 8;
__global__ void fully_connected_kernel(const float* __restrict__ in, int n, int in_f, const float* __restrict__ weight,
                                       const float* __restrict__ bias, int out_f, float* __restrict__ out) {
  const int warp = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  const int groups = (n + kRows - 1) / kRows;
  if (warp >= out_f * groups) return;
  const int o = warp % out_f, b0 = (warp / out_f) * kRows;
  float acc[kRows] = {};
  const float* wrow = weight + size_t(o) * in_f;
  for (int i = lane; i < in_f; i += 32) {
    const float wv = wrow[i];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (b0 + r < n) acc[r] += wv * in[size_t(b0 + r) * in_f + i];
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = acc[r];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0 && b0 + r < n) out[size_t(b0 + r) * out_f + o] = v + bias[o];
  }
}

}  // namespace

void launch_half_to_float(const __half* in, float* out, size_t count, cudaStream_t stream) {
  half_to_float_kernel<<<blocks_for(count), kThreads, 0, stream>>>(in, out, count);
  CUDA_CHECK_LAUNCH();
}

void launch_max_pool(const float* in, int n, int h, int w, int c, int kernel, int stride, int pad, __half* out,
                     cudaStream_t stream) {
  const int oh = (h + 2 * pad - kernel) / stride + 1, ow = (w + 2 * pad - kernel) / stride + 1;
  max_pool_kernel<<<blocks_for(size_t(n) * oh * ow * c), kThreads, 0, stream>>>(in, n, h, w, c, kernel, stride, pad,
                                                                                 oh, ow, out);
  CUDA_CHECK_LAUNCH();
}

void launch_global_avg_pool(const __half* in, int n, int hw, int c, float* out, cudaStream_t stream) {
  global_avg_pool_kernel<<<blocks_for(size_t(n) * c), kThreads, 0, stream>>>(in, n, hw, c, out);
  CUDA_CHECK_LAUNCH();
}

void launch_fully_connected(const float* in, int n, int in_f, const float* weight, const float* bias, int out_f,
                            float* out, cudaStream_t stream) {
  const size_t warps = size_t(out_f) * ((n + kRows - 1) / kRows);
  fully_connected_kernel<<<blocks_for(warps * 32), kThreads, 0, stream>>>(in, n, in_f, weight, bias, out_f, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace vc::inference
