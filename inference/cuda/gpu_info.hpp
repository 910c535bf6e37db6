// What the machine offers the cuDNN engine: driver, CUDA runtime, cuDNN (compiled vs loaded) and each GPU.
// `video-classifier doctor` prints this; the engine factory uses it to decide whether CUDA is usable.
#pragma once
#include <string>
#include <vector>

namespace vc::inference {

struct GpuDevice {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  int multiprocessors = 0;
  bool fp16_tensor_cores = false;  // compute capability >= 7.0
};

struct GpuReport {
  std::string driver_version;        // e.g. "580.95.05" (from /proc/driver/nvidia/version), "" if none
  int cuda_driver_api = 0;           // cudaDriverGetVersion, e.g. 13000; 0 = no driver
  int cuda_runtime = 0;              // cudaRuntimeGetVersion (statically linked)
  std::string cuda_error;            // why no GPU is usable, "" when one is
  std::vector<GpuDevice> devices;
  size_t cudnn_compiled = 0;         // CUDNN_VERSION at build time, e.g. 91900
  size_t cudnn_loaded = 0;           // cudnnGetVersion() of the library actually loaded
  std::string cudnn_library;         // path of the loaded libcudnn
  std::vector<std::string> cudnn_problems;  // sub-libraries that fail to load, version mismatch, …
};

// Never throws: every failure is recorded in the report.
GpuReport probe_gpus();

// The driver API's handle of the primary context the CUDA runtime uses on `device` (a CUcontext), made
// current on this thread: what GStreamer's NVDEC decoders must use so that their frames are valid device
// pointers for our kernels. Throws vc::UnavailableError when the driver cannot give it.
void* primary_cuda_context(int device);

// The CUDA runtime and cuDNN this binary was built with: "CUDA 13.0 (static), cuDNN 9.19.0".
std::string build_versions();

// Used and total memory of a GPU (for /metrics); false when it cannot be read.
bool gpu_memory(int device, size_t& used_bytes, size_t& total_bytes);

// "9.19.0" from 91900; "13.0" from 13000 (CUDA style).
std::string cudnn_version_string(size_t v);
std::string cuda_version_string(int v);

}  // namespace vc::inference
