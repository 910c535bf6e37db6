#include "inference/cpu/cpu_ops.hpp"

#include <cmath>

#include <algorithm>
#include <limits>
#include <thread>
#include <vector>

#include <Eigen/Core>

namespace vc::inference::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using StridedRowMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStridedRowMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

constexpr long kPixelsPerTask = 128;  // output pixels per GEMM: the im2col block stays in L2

}  // namespace

void parallel_for(long count, int threads, const std::function<void(long, long)>& fn) {
  if (count <= 0) return;
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = int(std::min<long>(threads, count));
  if (threads == 1) return fn(0, count);
  std::vector<std::thread> pool;
  const long per = (count + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const long b = t * per, e = std::min(count, b + per);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

void conv2d(const float* in, int n, const Shape& is, const Layer& l, const float* residual, float* out, int threads) {
  const int k = l.kernel, oh = (is.h + 2 * l.pad - k) / l.stride + 1, ow = (is.w + 2 * l.pad - k) / l.stride + 1;
  const int cin_g = l.in_channels / l.groups, cout_g = l.out_channels / l.groups, cout = l.out_channels;
  const long K = long(k) * k * cin_g;
  const long pixels = long(n) * oh * ow;
  const long tasks = (pixels + kPixelsPerTask - 1) / kPixelsPerTask;
  const bool direct = k == 1 && l.stride == 1 && l.pad == 0 && l.groups == 1;  // the input already is the matrix

  parallel_for(tasks, threads, [&](long t0, long t1) {
    std::vector<float> cols(direct ? 0 : size_t(kPixelsPerTask * K));
    for (long t = t0; t < t1; ++t) {
      const long p0 = t * kPixelsPerTask, rows = std::min(kPixelsPerTask, pixels - p0);
      for (int g = 0; g < l.groups; ++g) {
        const float* a = nullptr;
        if (direct) {
          a = in + p0 * is.c;
        } else {
          // im2col: row r holds the k*k*cin_g inputs of output pixel p0+r (zeros where the window is padding).
          for (long r = 0; r < rows; ++r) {
            const long p = p0 + r;
            const int x = int(p % ow), y = int((p / ow) % oh), b = int(p / (long(ow) * oh));
            float* row = cols.data() + r * K;
            for (int ky = 0; ky < k; ++ky) {
              const int iy = y * l.stride - l.pad + ky;
              for (int kx = 0; kx < k; ++kx) {
                const int ix = x * l.stride - l.pad + kx;
                float* dst = row + (ky * k + kx) * cin_g;
                if (iy < 0 || iy >= is.h || ix < 0 || ix >= is.w) {
                  std::fill(dst, dst + cin_g, 0.f);
                } else {
                  const float* src = in + ((long(b) * is.h + iy) * is.w + ix) * is.c + g * cin_g;
                  std::copy(src, src + cin_g, dst);
                }
              }
            }
          }
          a = cols.data();
        }
        const long lda = direct ? is.c : K;
        ConstStridedRowMap A(a, rows, K, Eigen::OuterStride<>(lda));
        ConstRowMap W(l.weight.data() + size_t(g) * cout_g * K, cout_g, K);
        StridedRowMap C(out + p0 * cout + g * cout_g, rows, cout_g, Eigen::OuterStride<>(cout));
        C.noalias() = A * W.transpose();
      }
      for (long r = 0; r < rows; ++r) {
        float* o = out + (p0 + r) * cout;
        const float* res = residual ? residual + (p0 + r) * cout : nullptr;
        for (int c = 0; c < cout; ++c) {
          float v = o[c] + l.bias[c] + (res ? res[c] : 0.f);
          o[c] = l.relu ? std::max(v, 0.f) : v;
        }
      }
    }
  });
}

void max_pool(const float* in, int n, const Shape& is, const Layer& l, float* out, int threads) {
  const int oh = (is.h + 2 * l.pad - l.kernel) / l.stride + 1, ow = (is.w + 2 * l.pad - l.kernel) / l.stride + 1;
  parallel_for(long(n) * oh, threads, [&](long r0, long r1) {
    for (long r = r0; r < r1; ++r) {
      const int b = int(r / oh), y = int(r % oh);
      for (int x = 0; x < ow; ++x) {
        float* o = out + ((long(b) * oh + y) * ow + x) * is.c;
        std::fill(o, o + is.c, -std::numeric_limits<float>::infinity());
        for (int ky = 0; ky < l.kernel; ++ky) {
          const int iy = y * l.stride - l.pad + ky;
          if (iy < 0 || iy >= is.h) continue;
          for (int kx = 0; kx < l.kernel; ++kx) {
            const int ix = x * l.stride - l.pad + kx;
            if (ix < 0 || ix >= is.w) continue;
            const float* src = in + ((long(b) * is.h + iy) * is.w + ix) * is.c;
            for (int c = 0; c < is.c; ++c) o[c] = std::max(o[c], src[c]);
          }
        }
      }
    }
  });
}

void global_avg_pool(const float* in, int n, const Shape& is, float* out) {
  const long hw = long(is.h) * is.w;
  for (int b = 0; b < n; ++b) {
    std::vector<double> sum(is.c, 0.0);  // double: the mean of 49..3136 values stays exact to FP32
    for (long p = 0; p < hw; ++p) {
      const float* src = in + (b * hw + p) * is.c;
      for (int c = 0; c < is.c; ++c) sum[c] += src[c];
    }
    for (int c = 0; c < is.c; ++c) out[long(b) * is.c + c] = float(sum[c] / double(hw));
  }
}

void fully_connected(const float* in, int n, const Layer& l, float* out) {
  ConstRowMap X(in, n, l.in_channels);
  ConstRowMap W(l.weight.data(), l.out_channels, l.in_channels);
  Eigen::Map<RowMatrix> Y(out, n, l.out_channels);
  Y.noalias() = X * W.transpose();
  for (int b = 0; b < n; ++b) {
    for (int o = 0; o < l.out_channels; ++o) Y(b, o) += l.bias[o];
  }
}

double relative_error(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return a.size() != b.size() ? INFINITY : std::sqrt(num / (den > 0 ? den : 1e-30));
}

}  // namespace vc::inference::cpu
