#include "inference/cuda/engine/engine_kernels.hpp"

#include <algorithm>
#include <cfloat>

#include "config/errors.hpp"
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

// The mean of one channel of one image, in a fixed order both heads share (so they give the same bits): positions
// j = k, k + kPoolParts, ... summed into part k, then the parts added in order k = 0, 1, ... The separate pool
// kernel computes the parts in parallel (one thread each: a few loads in flight per thread instead of hw
// dependent ones), the fused head sequentially.
constexpr int kPoolParts = 8;
__device__ __forceinline__ float channel_part(const __half* __restrict__ p, int hw, int c, int k) {
  float part = 0.f;
#pragma unroll 7
  for (int j = k; j < hw; j += kPoolParts) part += __half2float(p[size_t(j) * c]);
  return part;
}
__device__ __forceinline__ float channel_mean(const __half* __restrict__ p, int hw, int c) {
  float total = 0.f;
  for (int k = 0; k < kPoolParts; ++k) total += channel_part(p, hw, c, k);
  return total / float(hw);
}

// CTA (channel block x, image y): 32 channels (one per lane) x kPoolParts parts (one per warp), reduced through
// shared memory in channel_mean's order.
__global__ void global_avg_pool_kernel(const __half* __restrict__ in, int n, int hw, int c, float* __restrict__ out) {
  __shared__ float parts[kPoolParts][32];
  const int lane = int(threadIdx.x), k = int(threadIdx.y), b = int(blockIdx.y);
  const int ch = int(blockIdx.x) * 32 + lane;
  if (ch < c) parts[k][lane] = channel_part(in + size_t(b) * hw * c + ch, hw, c, k);
  __syncthreads();
  if (k != 0 || ch >= c) return;
  float total = 0.f;
  for (int j = 0; j < kPoolParts; ++j) total += parts[j][lane];
  out[size_t(b) * c + ch] = total / float(hw);
}

// out[b0 + r][o] for r < rows (at most R) with one warp: each lane takes groups of 4 features (16-byte loads of
// the weight row, several in flight) — lane-strided scalars when the feature count is not a multiple of 4 — with
// FP32 FMAs in a fixed order, the weight row read once for all rows, then a shuffle reduction. Shared by both heads
// (same order, same bits). x(r, i) reads feature i of row r; the rows and the weight rows must be 16-byte aligned
// when in_f % 4 == 0 (cudaMalloc'd, shared memory).
template <int R, typename Features>
__device__ __forceinline__ void classify_rows(Features x, int rows, int in_f, const float* __restrict__ wrow,
                                              float bias, int lane, float* __restrict__ out, int out_stride) {
  float acc[R] = {};
  if (in_f % 4 == 0) {
    const auto* w4 = reinterpret_cast<const float4*>(wrow);
#pragma unroll 4
    for (int g = lane; g < in_f / 4; g += 32) {
      const float4 wv = w4[g];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r < rows) {
          const float4 xv = x.quad(r, g);
          acc[r] += wv.x * xv.x;
          acc[r] += wv.y * xv.y;
          acc[r] += wv.z * xv.z;
          acc[r] += wv.w * xv.w;
        }
      }
    }
  } else {
    for (int i = lane; i < in_f; i += 32) {
      const float wv = wrow[i];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r < rows) acc[r] += wv * x.at(r, i);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0 && r < rows) out[size_t(r) * out_stride] = v + bias;
  }
}

// Row-major features [row][stride] (global or shared memory), as classify_rows reads them.
struct FeatureRows {
  const float* __restrict__ p;
  int stride;
  __device__ float at(int r, int i) const { return p[size_t(r) * stride + i]; }
  __device__ float4 quad(int r, int g) const { return reinterpret_cast<const float4*>(p + size_t(r) * stride)[g]; }
};

// One warp per (output feature, group of kRows images): the weight row is read once per group, the dot
// products are reduced with shuffles. Plain FP32 FMA: no Tensor Cores, no TF32.
constexpr int kRows = 8;
__global__ void fully_connected_kernel(const float* __restrict__ in, int n, int in_f, const float* __restrict__ weight,
                                       const float* __restrict__ bias, int out_f, float* __restrict__ out) {
  const int warp = int((size_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
  const int groups = (n + kRows - 1) / kRows;
  if (warp >= out_f * groups) return;
  const int o = warp % out_f, b0 = (warp / out_f) * kRows;
  classify_rows<kRows>(FeatureRows{in + size_t(b0) * in_f, in_f}, min(kRows, n - b0), in_f, weight + size_t(o) * in_f,
                       bias[o], lane, out + size_t(b0) * out_f + o, out_f);
}

// The fused head: CTA (x, y) pools images [x R, x R + R) into shared memory, then its warps take the classes of
// slice y, one class per warp at a time.
template <int R>
__global__ void pooled_classifier_kernel(const __half* __restrict__ in, int n, int hw, int c,
                                         const float* __restrict__ weight, const float* __restrict__ bias, int out_f,
                                         int classes_per_cta, float* __restrict__ out) {
  extern __shared__ float pooled[];  // [R][c]
  const int b0 = int(blockIdx.x) * R, rows = min(R, n - b0);
  for (int i = int(threadIdx.x); i < rows * c; i += int(blockDim.x)) {
    const int r = i / c, ch = i % c;
    pooled[i] = channel_mean(in + size_t(b0 + r) * hw * c + ch, hw, c);
  }
  __syncthreads();
  const int lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  const int o_end = min(out_f, int(blockIdx.y + 1) * classes_per_cta);
  for (int o = int(blockIdx.y) * classes_per_cta + int(threadIdx.x) / 32; o < o_end; o += warps) {
    classify_rows<R>(FeatureRows{pooled, c}, rows, c, weight + size_t(o) * c, bias[o], lane, out + size_t(b0) * out_f + o,
                     out_f);
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
  if (n < 1 || n > 65535 || hw < 1 || c < 1) throw InternalError("launch_global_avg_pool: bad shape");
  global_avg_pool_kernel<<<dim3(unsigned((c + 31) / 32), unsigned(n)), dim3(32, kPoolParts), 0, stream>>>(in, n, hw, c,
                                                                                                      out);
  CUDA_CHECK_LAUNCH();
}

void launch_fully_connected(const float* in, int n, int in_f, const float* weight, const float* bias, int out_f,
                            float* out, cudaStream_t stream) {
  const size_t warps = size_t(out_f) * ((n + kRows - 1) / kRows);
  fully_connected_kernel<<<blocks_for(warps * 32), kThreads, 0, stream>>>(in, n, in_f, weight, bias, out_f, out);
  CUDA_CHECK_LAUNCH();
}

void launch_pooled_classifier(const __half* in, int n, int hw, int c, const float* weight, const float* bias, int out_f,
                              float* out, int multiprocessors, cudaStream_t stream) {
  if (n < 1 || hw < 1 || c < 1 || out_f < 1) throw InternalError("launch_pooled_classifier: empty shape");
  // Images per CTA: up to kRows, as many as the batch has, within the default 48 KB of shared memory.
  constexpr size_t kSharedLimit = 48 << 10;
  int rows = 1;
  while (rows < kRows && rows * 2 <= n && size_t(rows) * 2 * c * sizeof(float) <= kSharedLimit) rows *= 2;
  if (size_t(rows) * c * sizeof(float) > kSharedLimit) throw InternalError("launch_pooled_classifier: too many features");
  // Class slices: enough CTAs for two per SM, at least one class per warp per slice.
  const int groups = (n + rows - 1) / rows, warps = kThreads / 32;
  const int max_slices = (out_f + warps - 1) / warps;
  const int slices = std::clamp((2 * multiprocessors + groups - 1) / groups, 1, max_slices);
  const int per_cta = (out_f + slices - 1) / slices;
  const dim3 grid(unsigned(groups), unsigned((out_f + per_cta - 1) / per_cta));
  const size_t smem = size_t(rows) * c * sizeof(float);
  switch (rows) {
    case 1: pooled_classifier_kernel<1><<<grid, kThreads, smem, stream>>>(in, n, hw, c, weight, bias, out_f, per_cta, out); break;
    case 2: pooled_classifier_kernel<2><<<grid, kThreads, smem, stream>>>(in, n, hw, c, weight, bias, out_f, per_cta, out); break;
    case 4: pooled_classifier_kernel<4><<<grid, kThreads, smem, stream>>>(in, n, hw, c, weight, bias, out_f, per_cta, out); break;
    default: pooled_classifier_kernel<8><<<grid, kThreads, smem, stream>>>(in, n, hw, c, weight, bias, out_f, per_cta, out); break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace vc::inference
