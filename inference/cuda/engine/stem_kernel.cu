// The fused ResNet stem: conv 7x7/2 pad 3 + bias + ReLU + max-pool 3x3/2 pad 1 in one kernel, FP16 NHWC in
// and out, at FP32 accuracy on Tensor Cores.
//
// Why split-FP16 Tensor Cores. The stem is 2*147*64 FLOP per conv pixel: 60 GFLOP at batch 256 (224x224).
// Strict FP32 on CUDA cores (cuDNN's FMA math) runs it at ~20 TFLOP/s, 3 ms. Tensor Cores need the weights
// split, and the input needs nothing: it is FP16 already, exact in any Tensor-Core type. Each FP32 weight,
// scaled by 2^e per output channel so that the channel's largest weight lies in [2^14, 2^15), becomes hi =
// fp16(w) and lo = fp16(w - hi): 11 + 11 significant bits, a representation error of ~2^-22 |w| (the scale
// keeps lo out of FP16's subnormal range for every weight that matters). conv = x*hi + x*lo, two FP16
// products with FP32 accumulation per k, gives errors of ~1e-7 relative, FP32 level (the test bound is 2e-5).
// The TF32 version of the same idea (hi/lo = tf32 halves) is exactly as accurate but costs twice as much: an
// m16n8k8 TF32 mma does half the work of an m16n8k16 FP16 mma in the same issue slot, and its A fragments
// take twice the registers and shared-memory loads. Budget for batch 256 at ~600 TFLOP/s of dense FP16
// mma.sync on an H200: 2 products x (160/147 K padding) x (256/224 halo recompute) x 60 GFLOP = 150 GFLOP of
// mma work, ~0.25 ms, plus the staging and the epilogue: well under the 0.8 ms target. TF32 would be ~0.5 ms
// before overheads.
//
// The implicit GEMM. M = conv pixels, N = output channels, K = kh x (kw, c): for each kernel row kh the 7*C
// values (kw, c) are contiguous in the NHWC input, so a K pair (k, k+1) is one aligned 32-bit shared-memory
// word once each row's run is padded to an even length (7C + 1 for odd C). The pad slot reads the next
// column's channel 0 (times a zero weight); the A word is masked so that even a non-finite input there
// contributes an exact zero. K is padded to a multiple of 16 with zero weights (C=3: 7 * 22 = 154 -> 160, 10
// mma k-steps).
//
// The tile. A CTA computes 7 x 8 pooled pixels, i.e. 15 x 17 = 255 conv pixels (16 m-tiles of 16, one padding
// row) from a 35 x 40 input patch staged in shared memory as FP16. 8 warps: 4 along M (4 m-tiles each) x 2
// along N (n-tiles interleaved so that narrow channel blocks stay balanced); per k-step a warp loads 16 A
// words and 4 B fragments (hi and lo together, one 16-byte load) for 32 mmas. B (the whole K for up to 64
// channels, 40 KB for C=3) is loaded once per CTA: the grid is persistent (two CTAs per SM) and walks the
// tiles. Bias + ReLU are applied in registers, the conv tile goes to shared memory rounded to the output
// type, and the pool reads it from there: rounding is monotonic, so max-then-round equals round-then-max, bit
// for bit. When the grid would leave SMs idle (batch 1-2) a CTA takes 32 or 16 channels instead of 64.
//
// Pool padding: PyTorch pads the pool with -inf. Every 3x3/2 pooling window contains its centre conv pixel
// (2py, 2px), which is real, and every real value is >= 0 after the ReLU, so conv positions outside the image
// can be stored as 0 and the max is unchanged. NaN propagates (ReLU and max keep a NaN, unlike fmaxf).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/errors.hpp"
#include "inference/cuda/cuda_check.hpp"
#include "inference/cuda/engine/stem_kernel.hpp"
#include "inference/model/half.hpp"

namespace vc::inference {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsM = 4;             // warps along the conv pixels
constexpr int kMTilesPerWarp = 4;      // 16-pixel m-tiles per warp
constexpr int kNTilesPerWarp = 4;      // at most; 8-channel n-tiles j = warp_n, warp_n + 2, ...
constexpr int kMaxBlockChannels = 64;  // channels per CTA
static_assert(kMaxBlockChannels == 64, "FusedStemWeights::ctas_per_sm holds the widths 8, 16, .. 64");
constexpr int kPoolTileH = 7, kPoolTileW = 8;
constexpr int kConvTileH = 2 * kPoolTileH + 1, kConvTileW = 2 * kPoolTileW + 1;  // 15 x 17
constexpr int kConvPixels = kConvTileH * kConvTileW;                             // 255
constexpr int kConvRows = kWarpsM * kMTilesPerWarp * 16;  // 256: M padded to the m-tiles
static_assert(kConvRows >= kConvPixels && kConvRows - kConvPixels < 16, "m-tiles must cover the conv tile");
constexpr int kPatchH = 2 * (kConvTileH - 1) + kStemKernel;  // 35 input rows
// 40 input columns: the last one only feeds the pad slot (see the top).
constexpr int kPatchW = 2 * (kConvTileW - 1) + kStemKernel + 1;

// K layout and shared-memory sizes for C input channels.
template <int C>
struct Geometry {
  static constexpr int kRun = 7 * C + (C & 1);  // one kernel row's (kw, c) values, padded to even
  static constexpr int kValidK = 7 * kRun;
  static constexpr int kSteps = (kValidK + 15) / 16;  // mma k-steps of 16
  static constexpr int kRowHalves = kPatchW * C;      // patch row stride (halves)
  static constexpr int kPatchWords = kPatchH * kRowHalves / 2;
  static constexpr int kPatchBytes = kPatchWords * 4;
  static_assert(kRowHalves % 2 == 0 && kPatchBytes % 16 == 0, "patch rows must keep the A words aligned");
};

// Shared memory, in this order (every part a multiple of 16 bytes): B fragments [n-tile][k-step][lane]
// (uint4: hi pair, hi pair + 8, lo pair, lo pair + 8), the k-pair table [k-step][t] (uint4: offset, mask,
// offset + 8, mask + 8), per-channel scale and bias, the input patch (FP16), the conv tile
// [256][block_channels + 8] (OutT; the +8 keeps the accumulator stores and the pool's loads free of bank
// conflicts).
template <int C>
__host__ __device__ constexpr size_t b_bytes(int block_channels) {
  return size_t(block_channels / 8) * Geometry<C>::kSteps * 32 * 16;
}
template <int C>
__host__ __device__ constexpr size_t table_bytes() {
  return size_t(Geometry<C>::kSteps) * 4 * 16;
}
constexpr size_t kScaleBiasBytes = 2 * kMaxBlockChannels * sizeof(float);
template <int C, typename OutT>
__host__ __device__ constexpr size_t shared_bytes(int block_channels) {
  return b_bytes<C>(block_channels) + table_bytes<C>() + kScaleBiasBytes + Geometry<C>::kPatchBytes +
         size_t(kConvRows) * (block_channels + 8) * sizeof(OutT);
}

struct StemParams {
  const __half* in;
  void* out;
  int h, w, oh, ow, ph, pw;          // input, conv and pooled extents
  int tiles_x, tiles_y, num_tiles;   // pooled tiles per row, per column, in the batch
  int out_channels, block_channels;  // blockIdx.y selects channels [y * block_channels, ...)
  const uint4* fragments;
  const float* scale_bias;
};

// The byte offset (within a kernel window in the patch) and the mask of the A word holding K pair (k, k+1).
template <int C>
__host__ __device__ constexpr uint2 k_pair(int k) {
  using G = Geometry<C>;
  // K padding: zero weights, and the zero mask makes the product exactly 0 whatever the patch holds.
  if (k >= G::kValidK) return {0u, 0u};
  const int kh = k / G::kRun, i = k % G::kRun;
  const bool pad_slot = (C & 1) && i == 7 * C - 1;  // (kw 6, c C-1) and the pad slot: keep the low half only
  return {uint32_t(kh * G::kRowHalves + i) * 2u, pad_slot ? 0x0000ffffu : 0xffffffffu};
}

// The weight of K index k (padded order) for output channel o, from OHWI; 0 in the padding.
template <int C>
float padded_weight(const std::vector<float>& w, int o, int k) {
  using G = Geometry<C>;
  if (k >= G::kValidK) return 0.f;
  const int kh = k / G::kRun, i = k % G::kRun;
  if (i >= 7 * C) return 0.f;
  const int kw = i / C, c = i % C;
  return w[((size_t(o) * 7 + kh) * 7 + kw) * C + c];
}

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
  __trap();  // no m16n8k16 FP16 mma below sm_80: the launcher never runs the kernel there
#endif
}

// ReLU and max that keep NaN (fmaxf would drop it), matching the CPU reference's std::max(v, 0.f).
__device__ __forceinline__ float relu(float v) { return v < 0.f ? 0.f : v; }
__device__ __forceinline__ float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }

template <typename OutT>
__device__ __forceinline__ void store_pair(OutT* dst, float v0, float v1) {
  if constexpr (sizeof(OutT) == 2) {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
  } else {
    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
  }
}

// Element-wise max of two 16-byte vectors of OutT.
template <typename OutT>
__device__ __forceinline__ uint4 max16(uint4 a, uint4 b) {
  if constexpr (sizeof(OutT) == 2) {
    __half2* x = reinterpret_cast<__half2*>(&a);
    const __half2* y = reinterpret_cast<const __half2*>(&b);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    for (int i = 0; i < 4; ++i) x[i] = __hmax2_nan(x[i], y[i]);
#else
    for (int i = 0; i < 4; ++i) {
      x[i] = __floats2half2_rn(max_nan(__low2float(x[i]), __low2float(y[i])),
                               max_nan(__high2float(x[i]), __high2float(y[i])));
    }
#endif
    return a;
  } else {
    float* x = reinterpret_cast<float*>(&a);
    const float* y = reinterpret_cast<const float*>(&b);
    for (int i = 0; i < 4; ++i) x[i] = max_nan(x[i], y[i]);
    return a;
  }
}

// Copies the input patch of one tile into shared memory as FP16 pairs, zeros outside the image (the conv's
// padding). Row r of the patch is input row iy0 + r, columns ix0 .. ix0 + kPatchW - 1, all channels:
// contiguous in NHWC, so the half at position h of the patch row is element rowstart + h, valid when its
// column is inside.
template <int C>
__device__ __forceinline__ void stage_patch(const StemParams& p, int b, int iy0, int ix0, uint32_t* patch) {
  using G = Geometry<C>;
  constexpr int kWordsPerRow = G::kRowHalves / 2;
  constexpr int kIters = (G::kPatchWords + kThreads - 1) / kThreads;
  const int lo = max(0, -ix0) * C, hi = min(kPatchW, p.w - ix0) * C;  // valid halves of every row: [lo, hi)
  const unsigned short* in = reinterpret_cast<const unsigned short*>(p.in);
  uint32_t v[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {  // all loads first: they are independent and in flight together
    const int i = it * kThreads + int(threadIdx.x);
    const int r = i / kWordsPerRow, h = 2 * (i - r * kWordsPerRow);
    const int iy = iy0 + r;
    v[it] = 0;
    if (i < G::kPatchWords && iy >= 0 && iy < p.h) {
      using Index = long long;
      const Index start = (Index(b) * p.h + iy) * p.w * C + Index(ix0) * C;  // >= 0 wherever it is read
      const uint32_t v0 = h >= lo && h < hi ? __ldg(in + start + h) : 0u;
      const uint32_t v1 = h + 1 >= lo && h + 1 < hi ? __ldg(in + start + h + 1) : 0u;
      v[it] = v0 | (v1 << 16);
    }
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = it * kThreads + int(threadIdx.x);
    if (i < G::kPatchWords) patch[i] = v[it];
  }
}

template <int C, typename OutT>
__global__ void __launch_bounds__(kThreads, 2) fused_stem_kernel(const StemParams p) {
  using G = Geometry<C>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int bc = p.block_channels;
  const int c0 = int(blockIdx.y) * bc;
  const int nch = min(bc, p.out_channels - c0);  // the last block may be narrower
  const int ntiles_n = nch / 8;
  uint4* s_b = reinterpret_cast<uint4*>(smem);
  uint4* s_table = reinterpret_cast<uint4*>(smem + b_bytes<C>(bc));
  float* s_scale = reinterpret_cast<float*>(smem + b_bytes<C>(bc) + table_bytes<C>());
  float* s_bias = s_scale + kMaxBlockChannels;
  unsigned char* s_patch = smem + b_bytes<C>(bc) + table_bytes<C>() + kScaleBiasBytes;
  OutT* s_conv = reinterpret_cast<OutT*>(s_patch + G::kPatchBytes);
  const int conv_stride = bc + 8;

  // Once per CTA: this channel block's weights, scales and biases, and the k-pair table.
  const uint4* g_b = p.fragments + size_t(c0 / 8) * G::kSteps * 32;
  for (int i = int(threadIdx.x); i < ntiles_n * G::kSteps * 32; i += kThreads) s_b[i] = g_b[i];
  for (int i = int(threadIdx.x); i < nch; i += kThreads) {
    s_scale[i] = p.scale_bias[c0 + i];
    s_bias[i] = p.scale_bias[p.out_channels + c0 + i];
  }
  for (int i = int(threadIdx.x); i < G::kSteps * 4; i += kThreads) {
    const uint2 a = k_pair<C>(16 * (i / 4) + 2 * (i % 4)), b = k_pair<C>(16 * (i / 4) + 2 * (i % 4) + 8);
    s_table[i] = make_uint4(a.x, a.y, b.x, b.y);
  }

  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int g = lane / 4, t = lane % 4;  // the mma fragments' groupID and threadID_in_group
  const int warp_m = warp % kWarpsM, warp_n = warp / kWarpsM;
  // Where each of this thread's A rows (conv pixels g and g + 8 of its m-tiles) starts in the patch: the same
  // for every tile. The padding row (pixel 255) reads pixel 0's window; its result is never stored.
  uint32_t a_off[kMTilesPerWarp][2];
#pragma unroll
  for (int i = 0; i < kMTilesPerWarp; ++i) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int m = (warp_m * kMTilesPerWarp + i) * 16 + g + 8 * r;
      const int mm = m < kConvPixels ? m : 0;
      const int oy = mm / kConvTileW, ox = mm % kConvTileW;
      a_off[i][r] = uint32_t(2 * oy * G::kRowHalves + 2 * ox * C) * 2u;
    }
  }
  __syncthreads();

  for (int tile = int(blockIdx.x); tile < p.num_tiles; tile += int(gridDim.x)) {
    const int tx = tile % p.tiles_x, ty = (tile / p.tiles_x) % p.tiles_y, b = tile / (p.tiles_x * p.tiles_y);
    const int py0 = ty * kPoolTileH, px0 = tx * kPoolTileW;
    const int cy0 = 2 * py0 - 1, cx0 = 2 * px0 - 1;  // conv tile origin (the pool's pad is 1)
    // Every thread is past the previous tile's mma loop (the barrier before its pool): the patch may be
    // overwritten. s_conv is next written after the barrier below, when every thread is done with that pool.
    stage_patch<C>(p, b, 2 * cy0 - kStemPad, 2 * cx0 - kStemPad, reinterpret_cast<uint32_t*>(s_patch));
    __syncthreads();

    float acc[kMTilesPerWarp][kNTilesPerWarp][4] = {};
#pragma unroll
    for (int s = 0; s < G::kSteps; ++s) {
      const uint4 pair = s_table[s * 4 + t];
      uint32_t a[kMTilesPerWarp][4];
#pragma unroll
      for (int i = 0; i < kMTilesPerWarp; ++i) {
        a[i][0] = *reinterpret_cast<const uint32_t*>(s_patch + a_off[i][0] + pair.x) & pair.y;
        a[i][1] = *reinterpret_cast<const uint32_t*>(s_patch + a_off[i][1] + pair.x) & pair.y;
        a[i][2] = *reinterpret_cast<const uint32_t*>(s_patch + a_off[i][0] + pair.z) & pair.w;
        a[i][3] = *reinterpret_cast<const uint32_t*>(s_patch + a_off[i][1] + pair.z) & pair.w;
      }
#pragma unroll
      for (int jj = 0; jj < kNTilesPerWarp; ++jj) {
        const int j = warp_n + 2 * jj;
        if (j < ntiles_n) {
          const uint4 w = s_b[(j * G::kSteps + s) * 32 + lane];
#pragma unroll
          for (int i = 0; i < kMTilesPerWarp; ++i) {
            mma_16816(acc[i][jj], a[i], w.z, w.w);  // lo first: the small terms, then the large ones
            mma_16816(acc[i][jj], a[i], w.x, w.y);
          }
        }
      }
    }

    // Bias + ReLU (undoing the weights' power-of-two scale in the same FMA), rounded to OutT, into the conv
    // tile.
    float2 scale[kNTilesPerWarp], bias[kNTilesPerWarp];  // loaded once: the stores below might alias them
#pragma unroll
    for (int jj = 0; jj < kNTilesPerWarp; ++jj) {
      const int n = min(warp_n + 2 * jj, ntiles_n - 1) * 8 + 2 * t;
      scale[jj] = *reinterpret_cast<const float2*>(s_scale + n);
      bias[jj] = *reinterpret_cast<const float2*>(s_bias + n);
    }
#pragma unroll
    for (int i = 0; i < kMTilesPerWarp; ++i) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int m = (warp_m * kMTilesPerWarp + i) * 16 + g + 8 * r;
        if (m >= kConvPixels) continue;
        const int oy = m / kConvTileW, ox = m % kConvTileW;
        const int cy = cy0 + oy, cx = cx0 + ox;
        const bool inside = cy >= 0 && cy < p.oh && cx >= 0 && cx < p.ow;  // else pool padding: 0 (see top)
#pragma unroll
        for (int jj = 0; jj < kNTilesPerWarp; ++jj) {
          const int j = warp_n + 2 * jj;
          if (j < ntiles_n) {
            const int n = j * 8 + 2 * t;
            const float v0 = inside ? relu(fmaf(acc[i][jj][2 * r], scale[jj].x, bias[jj].x)) : 0.f;
            const float v1 = inside ? relu(fmaf(acc[i][jj][2 * r + 1], scale[jj].y, bias[jj].y)) : 0.f;
            store_pair(s_conv + m * conv_stride + n, v0, v1);
          }
        }
      }
    }
    __syncthreads();

    // Max-pool: one thread per pooled pixel and 16-byte chunk of channels; 16-byte loads and stores.
    constexpr int kVec = 16 / int(sizeof(OutT));
    const int chunks = nch / kVec;
    OutT* out = static_cast<OutT*>(p.out);
    for (int item = int(threadIdx.x); item < kPoolTileH * kPoolTileW * chunks; item += kThreads) {
      const int chunk = item % chunks, pix = item / chunks;
      const int pyl = pix / kPoolTileW, pxl = pix % kPoolTileW;
      const int py = py0 + pyl, px = px0 + pxl;
      if (py >= p.ph || px >= p.pw) continue;
      const OutT* src = s_conv + (2 * pyl * kConvTileW + 2 * pxl) * conv_stride + chunk * kVec;
      uint4 best = *reinterpret_cast<const uint4*>(src);
#pragma unroll
      for (int d = 1; d < 9; ++d) {
        best = max16<OutT>(
            best, *reinterpret_cast<const uint4*>(src + ((d / 3) * kConvTileW + d % 3) * conv_stride));
      }
      *reinterpret_cast<uint4*>(out + ((size_t(b) * p.ph + py) * p.pw + px) * p.out_channels + c0 +
                                chunk * kVec) = best;
    }
  }
}

template <int C, typename OutT>
void launch_for(const StemParams& base, const FusedStemWeights& wts, cudaStream_t stream) {
  const int oc = wts.out_channels();
  const auto blocks = [oc](int bc) { return (oc + bc - 1) / bc; };
  const auto narrower = [](int bc) { return std::max(8, (bc / 2 + 7) / 8 * 8); };
  // Channels per CTA: 64, fewer when the tiles alone would leave SMs idle, or when shared memory is short.
  int bc = std::min(kMaxBlockChannels, oc);
  while (bc > 16 && long(base.num_tiles) * blocks(bc) < wts.multiprocessors()) bc = narrower(bc);
  while (bc > 8 && shared_bytes<C, OutT>(bc) > wts.max_shared_bytes()) bc = narrower(bc);
  const size_t smem = shared_bytes<C, OutT>(bc);
  if (smem > wts.max_shared_bytes()) {
    throw InternalError(fmt::format("fused stem: needs {} bytes of shared memory, the GPU has {}", smem,
                                    wts.max_shared_bytes()));
  }
  const int per_sm = wts.ctas_per_sm(sizeof(OutT) == 4, bc);
  if (per_sm < 1) throw InternalError("fused stem: the kernel does not fit on an SM");
  StemParams p = base;
  p.block_channels = bc;
  // Persistent CTAs: as many as fit at once, each walking the tiles (B is loaded once per CTA).
  const int ctas = std::max(1, std::min(p.num_tiles, per_sm * wts.multiprocessors() / blocks(bc)));
  fused_stem_kernel<C, OutT><<<dim3(unsigned(ctas), unsigned(blocks(bc))), kThreads, smem, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

template <typename OutT>
void launch(const __half* in, int batch, int height, int width, const FusedStemWeights& wts, OutT* out,
            cudaStream_t stream) {
  if (!in || !out || batch < 1 || height < 1 || width < 1) {
    throw InternalError(
        fmt::format("launch_fused_stem: bad arguments (batch {}, {}x{})", batch, height, width));
  }
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0)
    throw InternalError("launch_fused_stem: output not 16-byte aligned");
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device != wts.device()) {
    throw InternalError(
        fmt::format("launch_fused_stem: weights are on GPU {}, the current GPU is {}", wts.device(), device));
  }
  StemParams p{};
  p.in = in;
  p.out = out;
  p.h = height;
  p.w = width;
  p.oh = stem_conv_extent(height);
  p.ow = stem_conv_extent(width);
  p.ph = stem_pool_extent(height);
  p.pw = stem_pool_extent(width);
  p.tiles_x = (p.pw + kPoolTileW - 1) / kPoolTileW;
  p.tiles_y = (p.ph + kPoolTileH - 1) / kPoolTileH;
  const long long tiles = (long long)(batch)*p.tiles_x * p.tiles_y;
  if (tiles > (1ll << 30) || (long long)(batch)*height * width * wts.in_channels() > (1ll << 40)) {
    throw InternalError("launch_fused_stem: input too large");
  }
  p.num_tiles = int(tiles);
  p.out_channels = wts.out_channels();
  p.fragments = wts.fragments();
  p.scale_bias = wts.scale_bias();
  switch (wts.in_channels()) {
    case 1:
      launch_for<1, OutT>(p, wts, stream);
      break;
    case 2:
      launch_for<2, OutT>(p, wts, stream);
      break;
    case 3:
      launch_for<3, OutT>(p, wts, stream);
      break;
    case 4:
      launch_for<4, OutT>(p, wts, stream);
      break;
    default:
      throw InternalError("launch_fused_stem: 1..4 input channels");
  }
}

template <int C>
std::vector<uint4> pack_fragments(const std::vector<float>& w, int oc, std::vector<float>& scale_inv) {
  using G = Geometry<C>;
  constexpr int kPerChannel = 49 * C;
  std::vector<uint4> frag(size_t(oc / 8) * G::kSteps * 32);
  std::vector<float> scale(static_cast<size_t>(oc));  // 2^e per output channel
  for (int o = 0; o < oc; ++o) {
    // 2^e with max |w| * 2^e in [2^14, 2^15): hi stays below FP16's 65504 and lo above its subnormals.
    float max_abs = 0.f;
    bool finite = true;
    for (int i = 0; i < kPerChannel; ++i) {
      const float v = w[size_t(o) * kPerChannel + i];
      finite = finite && std::isfinite(v);
      max_abs = std::max(max_abs, std::fabs(v));
    }
    int e = 0;
    if (finite && max_abs > 0.f) {
      int exponent = 0;
      std::frexp(max_abs, &exponent);  // max_abs in [2^(exponent-1), 2^exponent)
      e = std::clamp(15 - exponent, -100, 100);
    }
    scale[size_t(o)] = std::ldexp(1.f, e);
    scale_inv[size_t(o)] = std::ldexp(1.f, -e);
  }
  const auto split = [&](int o, int k, bool low) -> uint32_t {
    const float v = padded_weight<C>(w, o, k) * scale[size_t(o)];  // exact: a power of two
    const uint16_t hi = float_to_half(v);
    return low ? float_to_half(v - half_to_float(hi)) : hi;  // v - hi is exact in FP32
  };
  for (int j = 0; j < oc / 8; ++j) {
    for (int s = 0; s < G::kSteps; ++s) {
      for (int lane = 0; lane < 32; ++lane) {
        const int o = j * 8 + lane / 4, k = 16 * s + 2 * (lane % 4);
        // The mma's B fragment: b0,b1 = rows k, k+1 and b2,b3 = rows k+8, k+9 of column o (low half first).
        const auto pair = [&](int kk, bool low) { return split(o, kk, low) | (split(o, kk + 1, low) << 16); };
        frag[(size_t(j) * G::kSteps + s) * 32 + lane] =
            make_uint4(pair(k, false), pair(k + 8, false), pair(k, true), pair(k + 8, true));
      }
    }
  }
  return frag;
}

// Allows the kernels of C input channels the shared memory of their largest configuration (or all there is:
// the launcher narrows the channel block to fit) and measures the occupancy of every channel-block width.
template <int C, typename OutT>
void configure_kernel(size_t max_shared, int* ctas_per_sm) {
  CUDA_CHECK(cudaFuncSetAttribute(fused_stem_kernel<C, OutT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(std::min(shared_bytes<C, OutT>(kMaxBlockChannels), max_shared))));
  // All of L1 as shared memory, for two CTAs of ~85 KB per SM: the input patches are read once each, from L2.
  CUDA_CHECK(cudaFuncSetAttribute(fused_stem_kernel<C, OutT>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
  for (int bc = 8; bc <= kMaxBlockChannels; bc += 8) {
    int& n = ctas_per_sm[bc / 8 - 1];
    n = 0;
    if (shared_bytes<C, OutT>(bc) > max_shared) continue;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fused_stem_kernel<C, OutT>, kThreads,
                                                             shared_bytes<C, OutT>(bc)));
  }
}
template <int C>
void configure_kernels(size_t max_shared, std::array<int, 16>& ctas_per_sm) {
  configure_kernel<C, __half>(max_shared, ctas_per_sm.data());
  configure_kernel<C, float>(max_shared, ctas_per_sm.data() + 8);
}

}  // namespace

std::string fused_stem_unsupported(int device, int in_channels, int out_channels) {
  if (in_channels < 1 || in_channels > kStemMaxInChannels) {
    return fmt::format("{} input channels (the fused stem takes 1..{})", in_channels, kStemMaxInChannels);
  }
  if (out_channels < 8 || out_channels % 8 != 0) {
    return fmt::format("{} output channels (the fused stem needs a multiple of 8)", out_channels);
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device {}", device);
  }
  if (prop.major < 8)
    return fmt::format("compute capability {}.{} (the fused stem needs 8.0)", prop.major, prop.minor);
  int current = 0;
  cudaFuncAttributes attr{};
  if (cudaGetDevice(&current) != cudaSuccess || cudaSetDevice(device) != cudaSuccess ||
      cudaFuncGetAttributes(&attr, fused_stem_kernel<3, __half>) != cudaSuccess ||
      cudaSetDevice(current) != cudaSuccess) {
    cudaGetLastError();
    return "the fused stem kernel cannot be loaded on this GPU";
  }
  // Built for sm_75 only (or run from compute_75 PTX): the kernel body is the sm_80 fallback trap.
  if (attr.ptxVersion < 80)
    return fmt::format("this build has no sm_80+ code for the GPU (PTX {})", attr.ptxVersion);
  return "";
}

FusedStemWeights::FusedStemWeights(const std::vector<float>& weight, const std::vector<float>& bias,
                                   int in_channels, int out_channels)
    : in_channels_(in_channels), out_channels_(out_channels) {
  if (in_channels < 1 || in_channels > kStemMaxInChannels || out_channels < 8 || out_channels % 8 != 0 ||
      weight.size() != size_t(out_channels) * 49 * in_channels || bias.size() != size_t(out_channels)) {
    throw InternalError(fmt::format("fused stem: weights {} / bias {} do not fit {} -> {} channels",
                                    weight.size(), bias.size(), in_channels, out_channels));
  }
  CUDA_CHECK(cudaGetDevice(&device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  if (prop.major < 8) throw InternalError("fused stem: needs compute capability 8.0");
  multiprocessors_ = prop.multiProcessorCount;
  max_shared_bytes_ = prop.sharedMemPerBlockOptin;
  std::vector<float> scale_bias(size_t(out_channels) * 2);
  std::vector<uint4> frag;
  const size_t smem = max_shared_bytes_;
  switch (in_channels) {
    case 1:
      frag = pack_fragments<1>(weight, out_channels, scale_bias);
      configure_kernels<1>(smem, ctas_per_sm_);
      break;
    case 2:
      frag = pack_fragments<2>(weight, out_channels, scale_bias);
      configure_kernels<2>(smem, ctas_per_sm_);
      break;
    case 3:
      frag = pack_fragments<3>(weight, out_channels, scale_bias);
      configure_kernels<3>(smem, ctas_per_sm_);
      break;
    default:
      frag = pack_fragments<4>(weight, out_channels, scale_bias);
      configure_kernels<4>(smem, ctas_per_sm_);
      break;
  }
  std::copy(bias.begin(), bias.end(), scale_bias.begin() + out_channels);
  fragments_ = DeviceBuffer<uint4>(frag.size());
  copy_to_device(fragments_.get(), frag.data(), fragments_.bytes());
  scale_bias_ = DeviceBuffer<float>(scale_bias.size());
  copy_to_device(scale_bias_.get(), scale_bias.data(), scale_bias_.bytes());
}

void launch_fused_stem(const __half* in, int batch, int height, int width, const FusedStemWeights& weights,
                       __half* out, cudaStream_t stream) {
  launch(in, batch, height, width, weights, out, stream);
}

void launch_fused_stem(const __half* in, int batch, int height, int width, const FusedStemWeights& weights,
                       float* out, cudaStream_t stream) {
  launch(in, batch, height, width, weights, out, stream);
}

}  // namespace vc::inference
