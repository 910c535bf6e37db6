// The small kernels around the cuDNN convolutions: the FP16 -> FP32 stem input, max-pool (FP32 stem output ->
// FP16 body), global average pool (FP16 -> FP32) and the FP32 classifier, separately or fused in one launch.
// All NHWC, all asynchronous.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace vc::inference {

void launch_half_to_float(const __half* in, float* out, size_t count, cudaStream_t stream);
void launch_max_pool(const float* in, int n, int h, int w, int c, int kernel, int stride, int pad, __half* out,
                     cudaStream_t stream);
void launch_global_avg_pool(const __half* in, int n, int hw, int c, float* out, cudaStream_t stream);
// out[n][o] = bias[o] + sum_i weight[o][i] * in[n][i], FP32 throughout.
void launch_fully_connected(const float* in, int n, int in_features, const float* weight, const float* bias,
                            int out_features, float* out, cudaStream_t stream);
// Global average pool + classifier in one launch (in: n x hw x c FP16, out: n x out_features FP32): the same
// sums in the same order as the two kernels above, so the logits are bit-identical, without the pooled features'
// round trip through memory. Each CTA pools a few images and computes a slice of the classes for them, so the
// pooling is repeated once per slice. Since the separate pool spreads each channel over 8 warps it is the slower
// of the two at every ResNet head measured on the H200 (docs/BENCHMARKS.md); it can win with few classes, and
// the engine times both.
// `multiprocessors` sizes the grid.
void launch_pooled_classifier(const __half* in, int n, int hw, int c, const float* weight, const float* bias,
                              int out_features, float* out, int multiprocessors, cudaStream_t stream);

}  // namespace vc::inference
