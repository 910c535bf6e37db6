// The fused stem kernel (conv 7x7/2 + bias + ReLU + max-pool 3x3/2) against the CPU reference (cpu::conv2d +
// cpu::max_pool): FP32 output at FP32 accuracy, FP16 output within one FP16 step and almost always
// bit-identical, odd sizes, every supported input-channel count, channel counts that need several or partial
// channel blocks, and NaN/Inf that stay where they belong.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "config/errors.hpp"
#include "inference/cpu/cpu_ops.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine/stem_kernel.hpp"
#include "inference/model/half.hpp"
#include "test_helpers.hpp"

using namespace vc::inference;
using vc::test::relative_error;

TEST_SUITE_BEGIN("gpu.stem");

namespace {

bool fused_stem_runs_here() {
  const std::string why = fused_stem_unsupported(0, 3, 64);
  if (!why.empty()) MESSAGE("fused stem not supported on this GPU: " << why);
  return why.empty();
}

// A ResNet stem with kaiming-scaled random weights (BatchNorm folded: weights and a bias) and its max-pool.
struct Stem {
  Layer conv, pool;
};
Stem random_stem(int in_channels, int out_channels) {
  Stem s;
  s.conv.kind = LayerKind::Conv;
  s.conv.name = "conv1";
  s.conv.in_channels = in_channels;
  s.conv.out_channels = out_channels;
  s.conv.kernel = kStemKernel;
  s.conv.stride = kStemStride;
  s.conv.pad = kStemPad;
  s.conv.relu = true;
  std::normal_distribution<float> kaiming(0.f, std::sqrt(2.f / float(49 * in_channels)));
  s.conv.weight.resize(size_t(out_channels) * 49 * in_channels);
  for (auto& w : s.conv.weight) w = kaiming(vc::test::rng());
  s.conv.bias = vc::test::random_floats(size_t(out_channels), -0.3f, 0.3f);
  s.pool.kind = LayerKind::MaxPool;
  s.pool.name = "maxpool";
  s.pool.kernel = kStemPoolKernel;
  s.pool.stride = kStemPoolStride;
  s.pool.pad = kStemPoolPad;
  return s;
}

// What the engine's cuDNN path computes, in FP32 on the CPU: conv + bias + ReLU, then max-pool.
std::vector<float> cpu_stem(const Stem& s, const std::vector<float>& input, int batch, int h, int w) {
  const Shape in_shape{h, w, s.conv.in_channels};
  const Shape conv_shape{stem_conv_extent(h), stem_conv_extent(w), s.conv.out_channels};
  std::vector<float> conv(size_t(batch) * conv_shape.elements());
  cpu::conv2d(input.data(), batch, in_shape, s.conv, nullptr, conv.data(), 0);
  std::vector<float> pooled(size_t(batch) * stem_pool_extent(h) * stem_pool_extent(w) * s.conv.out_channels);
  cpu::max_pool(conv.data(), batch, conv_shape, s.pool, pooled.data(), 0);
  return pooled;
}

using vc::test::random_fp16_input;

// Runs the fused kernel with output type T; the output buffer is poisoned with NaN first.
template <typename T>
std::vector<T> gpu_stem(const FusedStemWeights& weights, const std::vector<uint16_t>& input, int batch, int h,
                        int w) {
  CudaStream stream = make_stream();
  DeviceBuffer<__half> in(input.size());
  copy_to_device(in.get(), input.data(), in.bytes());
  const size_t count = size_t(batch) * stem_pool_extent(h) * stem_pool_extent(w) * weights.out_channels();
  DeviceBuffer<T> out(count);
  CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream));  // (on the kernel's stream: before it)
  launch_fused_stem(in.get(), batch, h, w, weights, out.get(), stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<T> host(count);
  CUDA_CHECK(cudaMemcpy(host.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

struct Comparison {
  double relative = 0,
         max_relative = 0;     // ||gpu - cpu|| / ||cpu||, max |gpu - cpu| / max |cpu| (FP32 output)
  double identical = 0;        // fraction of FP16 outputs equal to the rounded CPU value
  size_t beyond_one_step = 0;  // FP16 outputs more than one FP16 step from it
};

// Both output types of the kernel against the CPU reference on one fresh random problem.
Comparison compare_stem(int in_channels, int out_channels, int batch, int h, int w) {
  const Stem s = random_stem(in_channels, out_channels);
  const auto input = random_fp16_input(size_t(batch) * h * w * in_channels);
  const auto want = cpu_stem(s, input.value, batch, h, w);
  const FusedStemWeights weights(s.conv.weight, s.conv.bias, in_channels, out_channels);
  const auto got = gpu_stem<float>(weights, input.fp16, batch, h, w);
  const auto got16 = gpu_stem<__half>(weights, input.fp16, batch, h, w);
  Comparison c;
  c.relative = relative_error(got, want);
  double max_err = 0, max_ref = 0;
  size_t identical = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
    if (std::isnan(got[i])) max_err = INFINITY;
    max_ref = std::max(max_ref, double(std::fabs(want[i])));
    uint16_t bits;
    std::memcpy(&bits, &got16[i], 2);
    const uint16_t expected = float_to_half(want[i]);
    if (bits == expected) {
      ++identical;
      continue;
    }
    const float a = half_to_float(bits), b = half_to_float(expected);
    const float step = std::max(std::fabs(b) * 0.0009765625f, 6.1e-5f);  // FP16 spacing at b (2^-10 relative)
    if (!(std::fabs(a - b) <= step)) ++c.beyond_one_step;
  }
  c.max_relative = max_err / std::max(max_ref, 1e-30);
  c.identical = double(identical) / double(want.size());
  return c;
}

}  // namespace

TEST_CASE("the fused stem matches conv + ReLU + max-pool on the CPU (FP32 and FP16 output)") {
  if (!fused_stem_runs_here()) return;
  const std::pair<int, int> sizes[] = {{224, 224}, {128, 128}, {64, 64}, {97, 131}};
  for (auto [h, w] : sizes) {
    for (int batch : {1, 3, 8, 32}) {
      CAPTURE(h);
      CAPTURE(w);
      CAPTURE(batch);
      const auto c = compare_stem(3, 64, batch, h, w);
      MESSAGE(h << "x" << w << " batch " << batch << ": relative " << c.relative << ", max " << c.max_relative
                << ", FP16 identical " << 100 * c.identical << "%");
      CHECK(c.relative < 2e-5);  // FP32 level: cuDNN's strict FP32 stem is ~1e-7 here
      CHECK(c.max_relative < 2e-5);
      CHECK(c.beyond_one_step == 0);  // FP16 output: the FP32-level result rounded, so within one step...
      CHECK(c.identical >= 0.99);     // ...and equal except where it lies within ~1e-7 of a rounding edge
    }
  }
}

TEST_CASE("the fused stem handles 1..4 input channels, narrow and wide outputs, tiny and odd images") {
  if (!fused_stem_runs_here()) return;
  struct Case {
    int in_channels, out_channels, batch, h, w;
  };
  // 8/16/24 channels: one partial channel block; 72 and 136: several blocks, the last one partial;
  // 1x1, 2x5, 7x3: images smaller than one tile; 161: tiles that overhang the image.
  const Case cases[] = {{1, 64, 2, 33, 47}, {2, 24, 3, 40, 29}, {4, 72, 2, 29, 40}, {3, 8, 1, 64, 64},
                        {3, 16, 5, 1, 1},   {3, 136, 2, 2, 5},  {4, 128, 1, 7, 3},  {3, 64, 2, 161, 161}};
  for (const auto& k : cases) {
    CAPTURE(k.in_channels);
    CAPTURE(k.out_channels);
    CAPTURE(k.batch);
    CAPTURE(k.h);
    CAPTURE(k.w);
    const auto c = compare_stem(k.in_channels, k.out_channels, k.batch, k.h, k.w);
    CHECK(c.relative < 2e-5);
    CHECK(c.max_relative < 2e-5);
    CHECK(c.beyond_one_step == 0);
  }
}

TEST_CASE(
    "a non-finite input reaches only the outputs whose window holds it; a NaN weight poisons its channel") {
  if (!fused_stem_runs_here()) return;
  const int batch = 2, h = 96, w = 96, oc = 64;
  Stem s = random_stem(3, oc);
  auto input = random_fp16_input(size_t(batch) * h * w * 3);
  // +inf at input pixel (40, 46) channel 0 of image 1. Odd channel counts pad each kernel row's K run with a
  // slot that reads channel 0 of the column after the window (2cx + 4, an even column) times a zero weight:
  // the kernel masks it, or inf * 0 = NaN would leak into the pooled pixels just left of the receptive field.
  const int iy = 40, ix = 46;
  input.fp16[((size_t(1) * h + iy) * w + ix) * 3] = 0x7c00;
  const FusedStemWeights weights(s.conv.weight, s.conv.bias, 3, oc);
  const auto got = gpu_stem<float>(weights, input.fp16, batch, h, w);
  const int ph = stem_pool_extent(h), pw = stem_pool_extent(w);
  // Pooled pixel (py, px) sees input rows 4py-5 .. 4py+5 and the same columns.
  size_t leaked = 0, poisoned = 0;
  for (int b = 0; b < batch; ++b) {
    for (int py = 0; py < ph; ++py) {
      for (int px = 0; px < pw; ++px) {
        const bool sees = b == 1 && std::abs(4 * py - iy) <= 5 && std::abs(4 * px - ix) <= 5;
        for (int o = 0; o < oc; ++o) {
          const float v = got[((size_t(b) * ph + py) * pw + px) * oc + o];
          if (!sees && !std::isfinite(v)) ++leaked;
          if (sees && !std::isfinite(v)) ++poisoned;
        }
      }
    }
  }
  CHECK(leaked == 0);
  CHECK(poisoned > 0);

  s.conv.weight[size_t(5) * 49 * 3 + 17] = std::numeric_limits<float>::quiet_NaN();  // channel 5
  const auto clean = random_fp16_input(size_t(batch) * h * w * 3);
  const FusedStemWeights nan_weights(s.conv.weight, s.conv.bias, 3, oc);
  const auto out = gpu_stem<float>(nan_weights, clean.fp16, batch, h, w);
  size_t nan5 = 0, bad_other = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i % oc == 5)
      nan5 += std::isnan(out[i]);
    else
      bad_other += !std::isfinite(out[i]);
  }
  CHECK(nan5 == out.size() / oc);  // ReLU and max keep NaN (fmaxf would drop it)
  CHECK(bad_other == 0);
}

TEST_CASE("the launcher rejects bad arguments") {
  if (!fused_stem_runs_here()) return;
  const Stem s = random_stem(3, 64);
  const FusedStemWeights weights(s.conv.weight, s.conv.bias, 3, 64);
  DeviceBuffer<__half> in(64 * 64 * 3), out(32 * 32 * 64 + 8);
  CHECK_THROWS_AS(launch_fused_stem(in.get(), 0, 64, 64, weights, out.get(), nullptr), vc::InternalError);
  CHECK_THROWS_AS(launch_fused_stem(in.get(), 1, 64, 64, weights, out.get() + 1, nullptr), vc::InternalError);
  CHECK_THROWS_AS(FusedStemWeights(s.conv.weight, s.conv.bias, 3, 60), vc::InternalError);
  CHECK_THROWS_AS(FusedStemWeights(s.conv.weight, s.conv.bias, 5, 64), vc::InternalError);
}

TEST_SUITE_END();
