// One thread per output pixel: map its centre into the frame (or into the frame's crop box), take four RGB taps (YUV converted per tap),
// blend bilinearly, normalize, store FP16. Templated on the pixel format so the inner loop never branches on it.
#include "inference/cuda/preprocess_kernels.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/cuda_check.hpp"

namespace vc::inference {
namespace {

constexpr int kThreads = 256;

struct Params {
  int size, channels;
  float scale[3], shift[3];  // normalized = v * scale + shift, with scale = 1/(255 std), shift = -mean/std
};

__device__ __forceinline__ float clamp255(float v) { return fminf(255.f, fmaxf(0.f, v)); }

__device__ __forceinline__ float3 yuv_to_rgb(float y, float u, float v, YuvMatrix m, bool full_range) {
  const float d = u - 128.f, e = v - 128.f;
  if (full_range) {
    if (m == YuvMatrix::BT709) {
      return make_float3(clamp255(y + 1.5748f * e), clamp255(y - 0.187324f * d - 0.468124f * e), clamp255(y + 1.8556f * d));
    }
    return make_float3(clamp255(y + 1.402f * e), clamp255(y - 0.344136f * d - 0.714136f * e), clamp255(y + 1.772f * d));
  }
  const float c = 1.164383f * (y - 16.f);
  if (m == YuvMatrix::BT709) {
    return make_float3(clamp255(c + 1.792741f * e), clamp255(c - 0.213249f * d - 0.532909f * e), clamp255(c + 2.112402f * d));
  }
  return make_float3(clamp255(c + 1.596027f * e), clamp255(c - 0.391762f * d - 0.812968f * e), clamp255(c + 2.017232f * d));
}

// A 16-bit little-endian sample, as 8-bit units (10-bit value / 4), as the CPU reference reads it.
__device__ __forceinline__ float sample10(const uint8_t* plane, int stride, int x, int y, bool high_bits) {
  const uint16_t v = *reinterpret_cast<const uint16_t*>(plane + size_t(y) * stride + 2 * size_t(x));
  return float(high_bits ? v >> 6 : v & 0x3ffu) * 0.25f;
}

// The RGB value of one pixel of the upright frame (x, y inside the shown frame; the frame may be stored turned).
template <PixelFormat F>
__device__ __forceinline__ float3 load_rgb(const FrameView& f, int x, int y) {
  const int sx = x, sy = y;
  switch (f.rotation) {
    case 90: x = sy, y = f.height - 1 - sx; break;
    case 180: x = f.width - 1 - sx, y = f.height - 1 - sy; break;
    case 270: x = f.width - 1 - sy, y = sx; break;
    default: break;
  }
  const uint8_t* row = f.planes[0] + size_t(y) * f.strides[0];
  if constexpr (F == PixelFormat::RGB) return make_float3(row[3 * x], row[3 * x + 1], row[3 * x + 2]);
  if constexpr (F == PixelFormat::BGR) return make_float3(row[3 * x + 2], row[3 * x + 1], row[3 * x]);
  if constexpr (F == PixelFormat::RGBA) return make_float3(row[4 * x], row[4 * x + 1], row[4 * x + 2]);
  if constexpr (F == PixelFormat::BGRx) return make_float3(row[4 * x + 2], row[4 * x + 1], row[4 * x]);
  if constexpr (F == PixelFormat::NV12) {
    const uint8_t* uv = f.planes[1] + size_t(y / 2) * f.strides[1] + 2 * (x / 2);
    return yuv_to_rgb(row[x], uv[0], uv[1], f.matrix, f.full_range);
  }
  if constexpr (F == PixelFormat::I420) {
    const uint8_t u = f.planes[1][size_t(y / 2) * f.strides[1] + x / 2];
    const uint8_t v = f.planes[2][size_t(y / 2) * f.strides[2] + x / 2];
    return yuv_to_rgb(row[x], u, v, f.matrix, f.full_range);
  }
  if constexpr (F == PixelFormat::P010) {
    return yuv_to_rgb(sample10(f.planes[0], f.strides[0], x, y, true),
                      sample10(f.planes[1], f.strides[1], 2 * (x / 2), y / 2, true),
                      sample10(f.planes[1], f.strides[1], 2 * (x / 2) + 1, y / 2, true), f.matrix, f.full_range);
  }
  if constexpr (F == PixelFormat::I420_10) {
    return yuv_to_rgb(sample10(f.planes[0], f.strides[0], x, y, false),
                      sample10(f.planes[1], f.strides[1], x / 2, y / 2, false),
                      sample10(f.planes[2], f.strides[2], x / 2, y / 2, false), f.matrix, f.full_range);
  }
  return make_float3(0, 0, 0);
}

template <PixelFormat F>
__global__ void preprocess_kernel(const GpuFrameDesc* __restrict__ descs, Params p, __half* __restrict__ out) {
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  if (pixel >= p.size * p.size) return;
  const GpuFrameDesc& d = descs[blockIdx.y];
  const FrameView& f = d.view;
  const ResizeGeometry& g = d.geometry;
  const int x = pixel % p.size, y = pixel / p.size;
  const float cx = x + 0.5f, cy = y + 0.5f;
  float3 c = make_float3(0.f, 0.f, 0.f);
  if (cx >= g.content_x0 && cx < g.content_x1 && cy >= g.content_y0 && cy < g.content_y1) {
    // Plain multiply and add (no FMA contraction) so the coordinates match the CPU reference bit for bit.
    const float sx = __fsub_rn(__fmul_rn(__fsub_rn(cx, g.offset_x), g.scale_x), 0.5f);
    const float sy = __fsub_rn(__fmul_rn(__fsub_rn(cy, g.offset_y), g.scale_y), 0.5f);
    const float fx0 = floorf(sx), fy0 = floorf(sy);
    const float ax = sx - fx0, ay = sy - fy0;
    // The box classified, in the picture as shown: the crop, or the whole picture. Taps are clamped to its edges.
    const bool turned = f.rotation == 90 || f.rotation == 270;
    const bool whole = f.crop.width <= 0 || f.crop.height <= 0;
    const int bx = whole ? 0 : f.crop.x, by = whole ? 0 : f.crop.y;
    const int w = whole ? (turned ? f.height : f.width) : f.crop.width;
    const int h = whole ? (turned ? f.width : f.height) : f.crop.height;
    const int x0 = bx + min(max(int(fx0), 0), w - 1), x1 = bx + min(max(int(fx0) + 1, 0), w - 1);
    const int y0 = by + min(max(int(fy0), 0), h - 1), y1 = by + min(max(int(fy0) + 1, 0), h - 1);
    const float3 p00 = load_rgb<F>(f, x0, y0), p01 = load_rgb<F>(f, x1, y0);
    const float3 p10 = load_rgb<F>(f, x0, y1), p11 = load_rgb<F>(f, x1, y1);
    auto lerp2 = [&](float a, float b, float cc, float dd) {
      return (1 - ay) * ((1 - ax) * a + ax * b) + ay * ((1 - ax) * cc + ax * dd);
    };
    c = make_float3(lerp2(p00.x, p01.x, p10.x, p11.x), lerp2(p00.y, p01.y, p10.y, p11.y),
                    lerp2(p00.z, p01.z, p10.z, p11.z));
  }
  __half* o = out + (size_t(d.out_index) * p.size * p.size + pixel) * p.channels;
  o[0] = __float2half_rn(c.x * p.scale[0] + p.shift[0]);
  o[1] = __float2half_rn(c.y * p.scale[1] + p.shift[1]);
  o[2] = __float2half_rn(c.z * p.scale[2] + p.shift[2]);
  for (int ch = 3; ch < p.channels; ++ch) o[ch] = __float2half_rn(0.f);
}

}  // namespace

void launch_preprocess(const GpuFrameDesc* descs, int n, PixelFormat format, const PreprocessParams& p, __half* out,
                       cudaStream_t stream) {
  if (n <= 0 || p.size <= 0 || p.channels < 3) throw DataError("launch_preprocess: bad batch, size or channels");
  Params k{p.size, p.channels, {}, {}};
  for (int c = 0; c < 3; ++c) {
    k.scale[c] = 1.f / (255.f * p.std[c]);
    k.shift[c] = -p.mean[c] / p.std[c];
  }
  const dim3 grid((p.size * p.size + kThreads - 1) / kThreads, n);
  switch (format) {
    case PixelFormat::RGB: preprocess_kernel<PixelFormat::RGB><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::BGR: preprocess_kernel<PixelFormat::BGR><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::RGBA: preprocess_kernel<PixelFormat::RGBA><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::BGRx: preprocess_kernel<PixelFormat::BGRx><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::NV12: preprocess_kernel<PixelFormat::NV12><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::I420: preprocess_kernel<PixelFormat::I420><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::P010: preprocess_kernel<PixelFormat::P010><<<grid, kThreads, 0, stream>>>(descs, k, out); break;
    case PixelFormat::I420_10:
      preprocess_kernel<PixelFormat::I420_10><<<grid, kThreads, 0, stream>>>(descs, k, out);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace vc::inference
