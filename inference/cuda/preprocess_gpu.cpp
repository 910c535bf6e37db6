#include "inference/cuda/preprocess_gpu.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::inference {
namespace {

constexpr size_t kAlign = 256;  // plane starts in the staging buffers: aligned for the kernel's loads
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

GpuPreprocessor::GpuPreprocessor(const PreprocessParams& params, int max_batch, cudaStream_t stream, int slots,
                                 size_t reserve_frame_bytes)
    : params_(params), max_batch_(max_batch), stream_(stream) {
  if (max_batch < 1 || slots < 1) throw InternalError("GpuPreprocessor: max_batch and slots must be >= 1");
  for (int i = 0; i < slots; ++i) {
    Slot s;
    s.pinned_frames = PinnedBuffer<uint8_t>(reserve_frame_bytes * size_t(max_batch));
    s.device_frames = DeviceBuffer<uint8_t>(reserve_frame_bytes * size_t(max_batch));
    s.pinned_descs = PinnedBuffer<GpuFrameDesc>(size_t(max_batch));
    s.device_descs = DeviceBuffer<GpuFrameDesc>(size_t(max_batch));
    s.consumed = make_event();
    slots_.push_back(std::move(s));
  }
}

size_t GpuPreprocessor::staging_bytes() const {
  size_t total = 0;
  for (const auto& s : slots_) total += s.device_frames.bytes() + s.pinned_frames.bytes();
  return total;
}

void GpuPreprocessor::run(std::span<const FrameView> frames, __half* out, int slot_index) {
  if (frames.empty() || int(frames.size()) > max_batch_) {
    throw DataError(fmt::format("preprocess: {} frames for a batch of at most {}", frames.size(), max_batch_));
  }
  if (slot_index < 0 || slot_index >= int(slots_.size())) throw InternalError("preprocess: no such staging slot");
  Slot& slot = slots_[size_t(slot_index)];
  // A host frame is staged once per batch, however many of its crops (regions) the batch holds.
  std::vector<const uint8_t*> staged;  // planes[0] of the host frames counted / copied
  auto first_time = [&staged](const FrameView& f) {
    if (std::find(staged.begin(), staged.end(), f.planes[0]) != staged.end()) return false;
    staged.push_back(f.planes[0]);
    return true;
  };
  size_t host_bytes = 0;
  for (const auto& f : frames) {
    validate_frame(f);
    if (f.memory == MemoryKind::Host && first_time(f)) {
      for (int i = 0; i < plane_count(f.format); ++i) host_bytes += aligned(plane_span_bytes(f, i));
    }
  }
  staged.clear();
  std::vector<FrameView> staged_views;  // the device view of each staged frame, in `staged` order
  // The slot's buffers are reused: wait until the GPU has read what was staged in them last time.
  if (slot.used) CUDA_CHECK(cudaEventSynchronize(slot.consumed));
  if (host_bytes > slot.device_frames.size()) {  // a larger batch than any before: grow once
    slot.pinned_frames = PinnedBuffer<uint8_t>(host_bytes);
    slot.device_frames = DeviceBuffer<uint8_t>(host_bytes);
  }
  // Host frames -> pinned (CPU copy), then one async copy of all of them to the device. Descriptors are grouped by
  // pixel format (one kernel instantiation each); each keeps the output position of its frame.
  GpuFrameDesc* descs = slot.pinned_descs.get();
  size_t offset = 0, count = 0;
  std::vector<PixelFormat> formats;
  for (const auto& f : frames) {
    if (std::find(formats.begin(), formats.end(), f.format) == formats.end()) formats.push_back(f.format);
  }
  std::vector<std::pair<size_t, size_t>> groups;  // (first desc, count) per format, in `formats` order
  for (PixelFormat format : formats) {
    const size_t first = count;
    for (size_t k = 0; k < frames.size(); ++k) {
      const FrameView& f = frames[k];
      if (f.format != format) continue;
      FrameView view = f;
      if (f.memory == MemoryKind::Host) {
        if (first_time(f)) {
          for (int i = 0; i < plane_count(f.format); ++i) {
            const size_t bytes = plane_span_bytes(f, i);
            std::memcpy(slot.pinned_frames.get() + offset, f.planes[i], bytes);
            view.planes[i] = slot.device_frames.get() + offset;
            offset += aligned(bytes);
          }
          staged_views.push_back(view);
        } else {
          const auto at = size_t(std::find(staged.begin(), staged.end(), f.planes[0]) - staged.begin());
          std::copy(std::begin(staged_views[at].planes), std::end(staged_views[at].planes), std::begin(view.planes));
        }
        view.memory = MemoryKind::Device;
      }
      const CropBox box = f.input_box();
      descs[count++] = {view, resize_geometry(box.width, box.height, params_), int(k)};
    }
    groups.emplace_back(first, count - first);
  }
  if (offset) {
    CUDA_CHECK(cudaMemcpyAsync(slot.device_frames.get(), slot.pinned_frames.get(), offset, cudaMemcpyHostToDevice, stream_));
  }
  CUDA_CHECK(cudaMemcpyAsync(slot.device_descs.get(), descs, count * sizeof(GpuFrameDesc), cudaMemcpyHostToDevice, stream_));
  for (size_t g = 0; g < groups.size(); ++g) {
    launch_preprocess(slot.device_descs.get() + groups[g].first, int(groups[g].second), formats[g], params_, out, stream_);
  }
  CUDA_CHECK(cudaEventRecord(slot.consumed, stream_));
  slot.used = true;
}

}  // namespace vc::inference
