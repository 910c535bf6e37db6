#include "pipeline/sources/gst_cuda.hpp"

#define GST_USE_UNSTABLE_API  // gst-plugins-bad's CUDA library (1.22) is declared unstable; we use 4 calls of it
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>

#include <dlfcn.h>

#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/gpu_info.hpp"
#include "pipeline/sources/gst_probe.hpp"
#include "pipeline/sources/gst_util.hpp"

namespace vc::pipeline {

GstContext* make_shared_cuda_context(int device) {
  ensure_gstreamer();  // a GstContext needs GStreamer initialized (this can be the run's first GStreamer call)
  // The library reaches the driver through a table it fills on loading (the nvcodec plugin does this only in the
  // process that loads it, which need not be ours yet).
  if (!gst_cuda_load_library()) throw UnavailableError("GStreamer's CUDA library cannot load the NVIDIA driver (libcuda)");
  void* primary = inference::primary_cuda_context(device);
  // A wrapped context: GStreamer pushes it around its own CUDA calls and never destroys it.
  GstCudaContext* wrapped = gst_cuda_context_new_wrapped(static_cast<CUcontext>(primary), CUdevice(device));
  if (!wrapped) throw UnavailableError(fmt::format("GStreamer cannot use the CUDA context of GPU {}", device));
  GstContext* context = gst_context_new_cuda_context(wrapped);
  gst_object_unref(wrapped);  // the GstContext holds its own reference
  return context;
}

GstMapFlags cuda_map_flags() { return GstMapFlags(GST_MAP_READ | GST_MAP_CUDA); }

namespace {

// gst_cuda_memory_sync (GStreamer >= 1.24): waits for the work pending on the memory's own CUDA stream. Looked up
// at run time: the library this is built against (1.22) has no such call, and its decoders synchronise themselves.
using MemorySync = void (*)(GstCudaMemory*);
MemorySync memory_sync() {
  static const auto sync = reinterpret_cast<MemorySync>(dlsym(RTLD_DEFAULT, "gst_cuda_memory_sync"));
  return sync;
}

}  // namespace

GpuFrameSync gpu_frame_sync() {
  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  const auto version = fmt::format("GStreamer {}.{}.{}", major, minor, micro);
  if (major == 1 && minor < 24) {
    // 1.22: the NVDEC decoders synchronise their stream before they push a frame (gstnvdec.c, gstnvdecoder.c).
    return {true, minor == 22, version + ": the decoder synchronises each frame before handing it over"};
  }
  if (memory_sync()) {
    return {true, false, version + ": each frame's CUDA stream is synchronised (gst_cuda_memory_sync) before it is read"};
  }
  return {false, false, version + ": gst_cuda_memory_sync is missing, so NVDEC frames are copied through host memory"};
}

void sync_cuda_buffer(GstBuffer* buffer) {
  const MemorySync sync = memory_sync();
  if (!sync) return;
  for (guint i = 0; i < gst_buffer_n_memory(buffer); ++i) {
    GstMemory* mem = gst_buffer_peek_memory(buffer, i);
    if (gst_is_cuda_memory(mem)) sync(GST_CUDA_MEMORY_CAST(mem));
  }
}

bool is_cuda_buffer(GstBuffer* buffer) {
  static const bool init = [] {
    gst_cuda_memory_init_once();
    return true;
  }();
  (void)init;
  return gst_buffer_n_memory(buffer) > 0 && gst_is_cuda_memory(gst_buffer_peek_memory(buffer, 0));
}

Frame in_host_memory(const Frame& frame) {
  if (frame.view.memory == inference::MemoryKind::Host) return frame;
  const auto mapped = std::static_pointer_cast<const MappedSample>(frame.holder);
  if (!mapped || !mapped->sample) throw InternalError("a frame in GPU memory without its sample");
  auto host = std::make_shared<MappedSample>();
  host->sample.reset(gst_sample_ref(mapped->sample.get()));
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, gst_sample_get_caps(host->sample.get())) ||
      !gst_video_frame_map(&host->frame, &info, gst_sample_get_buffer(host->sample.get()), GST_MAP_READ)) {
    throw InternalError("a frame in GPU memory could not be read on the CPU");
  }
  host->mapped = true;
  Frame out = frame;
  for (int i = 0; i < int(GST_VIDEO_FRAME_N_PLANES(&host->frame)) && i < 3; ++i) {
    out.view.planes[i] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&host->frame, i));
    out.view.strides[i] = GST_VIDEO_FRAME_PLANE_STRIDE(&host->frame, i);
  }
  out.view.memory = inference::MemoryKind::Host;
  out.holder = std::move(host);
  return out;
}

}  // namespace vc::pipeline
