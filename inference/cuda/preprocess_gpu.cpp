#include "inference/cuda/preprocess_gpu.hpp"

#include <cstring>

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::inference {

GpuPreprocessor::GpuPreprocessor(const PreprocessParams& params, int max_batch, cudaStream_t stream,
                                 size_t reserve_frame_bytes)
    : params_(params),
      max_batch_(max_batch),
      stream_(stream),
      pinned_frames_(reserve_frame_bytes * max_batch),
      device_frames_(reserve_frame_bytes * max_batch),
      pinned_descs_(max_batch),
      device_descs_(max_batch),
      staging_free_(make_event()) {}

void GpuPreprocessor::upload_descs(std::span<const FrameView> views) {
  for (size_t i = 0; i < views.size(); ++i) {
    pinned_descs_.get()[i] = {views[i], resize_geometry(views[i].width, views[i].height, params_)};
  }
  CUDA_CHECK(cudaMemcpyAsync(device_descs_.get(), pinned_descs_.get(), views.size() * sizeof(GpuFrameDesc),
                             cudaMemcpyHostToDevice, stream_));
}

void GpuPreprocessor::run_device(std::span<const FrameView> frames, __half* out) {
  if (frames.empty() || int(frames.size()) > max_batch_) {
    throw DataError(fmt::format("preprocess: {} frames for a batch of at most {}", frames.size(), max_batch_));
  }
  for (const auto& f : frames) {
    validate_frame(f);
    if (f.format != frames[0].format) throw DataError("preprocess: all frames of a batch must have one pixel format");
  }
  // The descriptor staging is reused: wait until the previous batch's copy of it has left.
  if (staging_used_) CUDA_CHECK(cudaEventSynchronize(staging_free_));
  upload_descs(frames);
  launch_preprocess(device_descs_.get(), int(frames.size()), frames[0].format, params_, out, stream_);
  CUDA_CHECK(cudaEventRecord(staging_free_, stream_));
  staging_used_ = true;
}

void GpuPreprocessor::run(std::span<const FrameView> frames, __half* out) {
  if (frames.empty() || int(frames.size()) > max_batch_) {
    throw DataError(fmt::format("preprocess: {} frames for a batch of at most {}", frames.size(), max_batch_));
  }
  size_t total = 0;
  for (const auto& f : frames) {
    validate_frame(f);
    for (int i = 0; i < plane_count(f.format); ++i) total += (plane_span_bytes(f, i) + 255) / 256 * 256;
  }
  if (staging_used_) CUDA_CHECK(cudaEventSynchronize(staging_free_));
  staging_used_ = false;
  if (total > device_frames_.size()) {  // a larger frame than any before: grow once
    pinned_frames_ = PinnedBuffer<uint8_t>(total);
    device_frames_ = DeviceBuffer<uint8_t>(total);
  }
  // Host -> pinned (CPU copy), then one async copy of the whole batch to the device.
  std::vector<FrameView> device_views(frames.begin(), frames.end());
  size_t offset = 0;
  for (size_t k = 0; k < frames.size(); ++k) {
    for (int i = 0; i < plane_count(frames[k].format); ++i) {
      const size_t bytes = plane_span_bytes(frames[k], i);
      std::memcpy(pinned_frames_.get() + offset, frames[k].planes[i], bytes);
      device_views[k].planes[i] = device_frames_.get() + offset;
      offset += (bytes + 255) / 256 * 256;
    }
  }
  CUDA_CHECK(cudaMemcpyAsync(device_frames_.get(), pinned_frames_.get(), offset, cudaMemcpyHostToDevice, stream_));
  run_device(device_views, out);
}

}  // namespace vc::inference
