// The engine's CUDA context, shared with GStreamer: NVDEC decoders given this context decode into GPU memory that
// our kernels can read directly (same device, same context — pointers from another context would not be valid).
#pragma once
#include <gst/gst.h>

#include <string>

#include "pipeline/core/frame.hpp"

namespace vc::pipeline {

// A GstContext ("gst.cuda.context") that wraps the primary CUDA context of `device` — the one the CUDA runtime,
// and so the cuDNN engine, uses. Set it on a pipeline before it starts. Throws vc::UnavailableError.
GstContext* make_shared_cuda_context(int device);

// Mapping flags that make gst_video_frame_map return device pointers for CUDA memory (GST_MAP_CUDA).
GstMapFlags cuda_map_flags();

// Whether a buffer's memory is GStreamer CUDA memory.
bool is_cuda_buffer(GstBuffer* buffer);

// From GStreamer 1.24 the NVDEC decoders write on a CUDA stream of their own and only mark the frame's memory as
// needing a sync (1.22 synchronised before pushing): whether frames can be read in GPU memory with the GStreamer in
// use, whether that version was verified on a GPU, and how (for doctor and the log).
struct GpuFrameSync {
  bool usable = false;
  bool verified = false;
  std::string how;
};
GpuFrameSync gpu_frame_sync();

// Waits for the work still pending on each CUDA memory of `buffer` (GStreamer >= 1.24; nothing before). Call before
// reading a decoded frame in GPU memory.
void sync_cuda_buffer(GstBuffer* buffer);

// The frame in host memory: the frame itself when it is there; an NVDEC frame in GPU memory is downloaded (GStreamer
// maps its CUDA memory for reading on the CPU). Throws vc::InternalError when that cannot be done.
Frame in_host_memory(const Frame& frame);

}  // namespace vc::pipeline
