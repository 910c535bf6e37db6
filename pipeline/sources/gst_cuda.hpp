// The engine's CUDA context, shared with GStreamer: NVDEC decoders given this context decode into GPU memory that
// our kernels can read directly (same device, same context — pointers from another context would not be valid).
#pragma once
#include <gst/gst.h>

namespace vc::pipeline {

// A GstContext ("gst.cuda.context") that wraps the primary CUDA context of `device` — the one the CUDA runtime,
// and so the cuDNN engine, uses. Set it on a pipeline before it starts. Throws vc::UnavailableError.
GstContext* make_shared_cuda_context(int device);

// Mapping flags that make gst_video_frame_map return device pointers for CUDA memory (GST_MAP_CUDA).
GstMapFlags cuda_map_flags();

// Whether a buffer's memory is GStreamer CUDA memory.
bool is_cuda_buffer(GstBuffer* buffer);

}  // namespace vc::pipeline
