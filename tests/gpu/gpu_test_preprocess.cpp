// The CUDA preprocessing kernel against the CPU reference: every format and resize mode, odd sizes, padded
// strides, mixed frame sizes in one batch, frames from host and from device memory.
#include <doctest/doctest.h>

#include <cmath>

#include "inference/cuda/cuda_memory.hpp"
#include "inference/model/half.hpp"
#include "inference/preprocess.hpp"
#include "inference/cuda/preprocess_gpu.hpp"
#include "test_helpers.hpp"

using namespace vc::inference;

TEST_SUITE_BEGIN("gpu.preprocess");

namespace {

// A random frame with each row padded by `pad` bytes (strides as GStreamer aligns them).
struct TestFrame {
  std::vector<uint8_t> bytes;
  FrameView view;
};

TestFrame random_frame(PixelFormat f, int w, int h, int pad) {
  TestFrame t;
  size_t offsets[3] = {0, 0, 0}, total = 0;
  for (int i = 0; i < plane_count(f); ++i) {
    t.view.strides[i] = int(plane_row_bytes(f, w, i)) + pad * (f == PixelFormat::P010 || f == PixelFormat::I420_10 ? 2 : 1);
    offsets[i] = total;
    total += size_t(t.view.strides[i]) * size_t(plane_rows(f, h, i));
  }
  t.bytes.resize(total);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : t.bytes) b = uint8_t(byte(vc::test::rng()));
  t.view.format = f;
  t.view.width = w;
  t.view.height = h;
  for (int i = 0; i < plane_count(f); ++i) t.view.planes[i] = t.bytes.data() + offsets[i];
  return t;
}

// Largest |gpu - cpu| over the batch, in units of the reference's FP16 spacing (1 = one FP16 step).
double compare(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& cpu) {
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const float a = half_to_float(gpu[i]), b = half_to_float(cpu[i]);
    if (std::isnan(a)) return INFINITY;
    const float ulp = std::max(std::fabs(b) * 0.0009765625f, 6.1e-5f);
    worst = std::max(worst, double(std::fabs(a - b) / ulp));
  }
  return worst;
}

}  // namespace

TEST_CASE("every format and resize mode matches the CPU reference on odd sizes") {
  const PixelFormat formats[] = {PixelFormat::RGB,  PixelFormat::BGR,  PixelFormat::RGBA, PixelFormat::BGRx,
                                 PixelFormat::NV12, PixelFormat::I420, PixelFormat::P010, PixelFormat::I420_10};
  const ResizeMode modes[] = {ResizeMode::Stretch, ResizeMode::Crop, ResizeMode::Letterbox};
  const std::pair<int, int> sizes[] = {{1, 1}, {33, 17}, {1921, 1081}};
  CudaStream stream = make_stream();
  for (auto format : formats) {
    for (auto mode : modes) {
      CAPTURE(pixel_format_name(format));
      CAPTURE(int(mode));
      PreprocessParams p;
      p.size = 224;
      p.mode = mode;
      p.channels = format == PixelFormat::RGB ? 4 : 3;  // also exercise channel padding
      // One batch holding all three sizes (different geometry per frame, one launch).
      std::vector<TestFrame> frames;
      std::vector<FrameView> views;
      for (auto [w, h] : sizes) {
        frames.push_back(random_frame(format, w, h, w % 7));
      }
      for (auto& f : frames) views.push_back(f.view);
      GpuPreprocessor pre(p, 3, stream);
      const size_t per = size_t(p.size) * p.size * p.channels;
      DeviceBuffer<__half> out(per * 3);
      CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream));  // poison: NaN everywhere
      pre.run(views, out.get());
      std::vector<uint16_t> gpu(per * 3);
      CUDA_CHECK(cudaMemcpyAsync(gpu.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<uint16_t> cpu(per * 3);
      for (int i = 0; i < 3; ++i) preprocess_cpu(views[i], p, cpu.data() + per * i);
      const double worst = compare(gpu, cpu);
      CHECK(worst <= 2.0);  // within two FP16 steps (FMA contraction may move a value across one rounding edge)
    }
  }
}

TEST_CASE("frames stored turned (a phone video's rotation) match the CPU reference for every rotation") {
  CudaStream stream = make_stream();
  for (auto format : {PixelFormat::NV12, PixelFormat::P010, PixelFormat::BGRx}) {
    for (int rotation : {90, 180, 270}) {
      CAPTURE(pixel_format_name(format));
      CAPTURE(rotation);
      PreprocessParams p;
      p.size = 224;
      p.mode = ResizeMode::Letterbox;
      auto frame = random_frame(format, 1081, 1921, 32);  // a portrait phone frame stored landscape, odd sizes
      frame.view.rotation = rotation;
      GpuPreprocessor pre(p, 1, stream);
      const size_t per = size_t(p.size) * p.size * p.channels;
      DeviceBuffer<__half> out(per);
      pre.run(std::span<const FrameView>(&frame.view, 1), out.get());
      std::vector<uint16_t> gpu(per), cpu(per);
      CUDA_CHECK(cudaMemcpyAsync(gpu.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      preprocess_cpu(frame.view, p, cpu.data());
      CHECK(compare(gpu, cpu) <= 2.0);
    }
  }
}

TEST_CASE("frames already in device memory give the same result as host frames") {
  CudaStream stream = make_stream();
  auto frame = random_frame(PixelFormat::NV12, 1920, 1080, 64);
  DeviceBuffer<uint8_t> dev(frame.bytes.size());
  copy_to_device(dev.get(), frame.bytes.data(), frame.bytes.size());
  FrameView dview = frame.view;
  dview.memory = MemoryKind::Device;
  for (int i = 0; i < 2; ++i) dview.planes[i] = dev.get() + (frame.view.planes[i] - frame.bytes.data());
  PreprocessParams p;
  GpuPreprocessor pre(p, 1, stream, 2);
  DeviceBuffer<__half> a(224 * 224 * 3), b(224 * 224 * 3);
  pre.run(std::span<const FrameView>(&frame.view, 1), a.get(), 0);
  pre.run(std::span<const FrameView>(&dview, 1), b.get(), 1);
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemcpy(ha.data(), a.get(), a.bytes(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hb.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  CHECK(ha == hb);
}

TEST_CASE("one batch mixing formats, host and device memory, full and limited range matches frame by frame") {
  CudaStream stream = make_stream();
  PreprocessParams p;
  p.size = 96;
  p.mode = ResizeMode::Letterbox;
  // NV12 (device, BT.709 limited), I420 (host, BT.601 full range, as JPEG decoders give), BGR (host), NV12 (host,
  // full range): the batch interleaves formats so each frame must land in its own output position.
  std::vector<TestFrame> frames;
  frames.push_back(random_frame(PixelFormat::NV12, 640, 360, 0));
  frames.push_back(random_frame(PixelFormat::I420, 97, 55, 3));
  frames.push_back(random_frame(PixelFormat::BGR, 160, 120, 1));
  frames.push_back(random_frame(PixelFormat::NV12, 31, 47, 5));
  frames[0].view.matrix = YuvMatrix::BT709;
  frames[1].view.full_range = true;
  frames[3].view.full_range = true;
  DeviceBuffer<uint8_t> dev(frames[0].bytes.size());
  copy_to_device(dev.get(), frames[0].bytes.data(), dev.bytes());
  std::vector<FrameView> views;
  for (auto& f : frames) views.push_back(f.view);
  views[0].memory = MemoryKind::Device;
  for (int i = 0; i < 2; ++i) views[0].planes[i] = dev.get() + (frames[0].view.planes[i] - frames[0].bytes.data());

  const size_t per = size_t(p.size) * p.size * p.channels;
  GpuPreprocessor pre(p, 4, stream, 2);
  DeviceBuffer<__half> out(per * 4);
  for (int round = 0; round < 3; ++round) {  // both staging slots, reused
    CAPTURE(round);
    CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream));
    pre.run(views, out.get(), round % 2);
    std::vector<uint16_t> gpu(per * 4), cpu(per * 4);
    CUDA_CHECK(cudaMemcpyAsync(gpu.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < 4; ++i) preprocess_cpu(frames[size_t(i)].view, p, cpu.data() + per * size_t(i));
    CHECK(compare(gpu, cpu) <= 2.0);
  }
  // Full range must differ from limited range on the same bytes (the flag is honoured, not ignored).
  FrameView limited = frames[1].view;
  limited.full_range = false;
  std::vector<uint16_t> a(per), b(per);
  preprocess_cpu(frames[1].view, p, a.data());
  preprocess_cpu(limited, p, b.data());
  CHECK(a != b);
}

TEST_CASE("crops (regions) of every format and rotation match the CPU reference, several of one frame in a batch") {
  const PixelFormat formats[] = {PixelFormat::RGB,  PixelFormat::BGR,  PixelFormat::RGBA, PixelFormat::BGRx,
                                 PixelFormat::NV12, PixelFormat::I420, PixelFormat::P010, PixelFormat::I420_10};
  CudaStream stream = make_stream();
  for (auto format : formats) {
    for (int rotation : {0, 90, 180, 270}) {
      CAPTURE(pixel_format_name(format));
      CAPTURE(rotation);
      PreprocessParams p;
      p.size = 64;
      p.mode = rotation % 180 ? ResizeMode::Letterbox : ResizeMode::Crop;
      auto frame = random_frame(format, 641, 359, 16);
      frame.view.rotation = rotation;
      const int sw = frame.view.shown_width(), sh = frame.view.shown_height();
      // Four boxes of one frame (odd origins and sizes, one at the far corner) from host memory, and the same
      // frame from device memory with a fifth box: one batch, one launch per format.
      const CropBox boxes[] = {{0, 0, 31, 17}, {sw - 101, sh - 77, 101, 77}, {13, 7, 1, 1}, {sw / 3, sh / 5, sw / 2, sh / 2},
                               {1, 3, sw - 2, sh - 4}};
      DeviceBuffer<uint8_t> dev(frame.bytes.size());
      copy_to_device(dev.get(), frame.bytes.data(), dev.bytes());
      std::vector<FrameView> views;
      for (const auto& b : boxes) {
        views.push_back(frame.view);
        views.back().crop = b;
      }
      for (int i = 0; i < plane_count(format); ++i) views.back().planes[i] = dev.get() + (frame.view.planes[i] - frame.bytes.data());
      views.back().memory = MemoryKind::Device;
      const size_t per = size_t(p.size) * p.size * p.channels, n = views.size();
      GpuPreprocessor pre(p, int(n), stream);
      DeviceBuffer<__half> out(per * n);
      CUDA_CHECK(cudaMemsetAsync(out.get(), 0xff, out.bytes(), stream));
      pre.run(views, out.get());
      std::vector<uint16_t> gpu(per * n), cpu(per * n);
      CUDA_CHECK(cudaMemcpyAsync(gpu.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      for (size_t i = 0; i < n; ++i) {
        FrameView host = views[i];
        host.memory = MemoryKind::Host;
        for (int k = 0; k < plane_count(format); ++k) host.planes[k] = frame.view.planes[k];
        preprocess_cpu(host, p, cpu.data() + per * i);
      }
      CHECK(compare(gpu, cpu) <= 2.0);
      // The boxes differ, so must the inputs (the crop is honoured, not ignored).
      CHECK(!std::equal(gpu.begin(), gpu.begin() + long(per), gpu.begin() + long(per) * 3));
    }
  }
}

TEST_SUITE_END();
