// The CPU reference layers: FP32, NHWC, multi-threaded. Readable first: these are the oracle every GPU layer
// is checked against. Convolution is im2col + an Eigen GEMM per block of output pixels.
#pragma once
#include <functional>
#include <span>

#include "inference/model/network.hpp"

namespace vc::inference::cpu {

// Runs fn(begin, end) over [0, count) split into chunks across `threads` threads (0 = all cores).
void parallel_for(long count, int threads, const std::function<void(long, long)>& fn);

// out[n][oh][ow][o] = relu?(conv(in)[..] + bias[o] + residual?[..]). `residual` may be null.
void conv2d(const float* in, int n, const Shape& in_shape, const Layer& conv, const float* residual, float* out,
            int threads);
void max_pool(const float* in, int n, const Shape& in_shape, const Layer& pool, float* out, int threads);
void global_avg_pool(const float* in, int n, const Shape& in_shape, float* out);
void fully_connected(const float* in, int n, const Layer& fc, float* out);

// ||a - b|| / ||b|| with b the reference; infinite when a holds NaN or the sizes differ. How every GPU result is
// judged against the CPU reference (tests, diagnose).
double relative_error(std::span<const float> a, std::span<const float> b);

}  // namespace vc::inference::cpu
