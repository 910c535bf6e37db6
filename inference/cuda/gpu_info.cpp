#include "inference/cuda/gpu_info.hpp"

#include <dlfcn.h>

#include <fstream>
#include <future>
#include <regex>

#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include "config/errors.hpp"
#include "inference/cuda/cuda_check.hpp"

namespace vc::inference {
namespace {

std::string read_driver_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  std::smatch m;
  static const std::regex version(R"(\s(\d+\.\d+(\.\d+)?)\s)");
  return std::regex_search(line, m, version) ? m[1].str() : line;
}

}  // namespace

void* primary_cuda_context(int device) {
  // The runtime creates the device's primary context on first use and makes it current; the driver API (reached
  // through the runtime, so that nothing links libcuda directly) names it.
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaFree(nullptr));
  using GetCurrent = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*)
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !fn) {
    cudaGetLastError();
    throw UnavailableError("the CUDA driver does not provide cuCtxGetCurrent");
  }
  void* context = nullptr;
  if (reinterpret_cast<GetCurrent>(fn)(&context) != 0 || !context) {
    throw UnavailableError(fmt::format("no CUDA context on device {}", device));
  }
  return context;
}

bool gpu_memory(int device, size_t& used, size_t& total) {
  size_t free_b = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, &total) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  used = total - free_b;
  return true;
}

std::string build_versions() {
  return fmt::format("CUDA {} (runtime linked statically), cuDNN {}", cuda_version_string(CUDART_VERSION),
                     cudnn_version_string(CUDNN_VERSION));
}

std::string cudnn_version_string(size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}
std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

GpuReport probe_gpus() {
  GpuReport r;
  // cuDNN 9's libcudnn.so is a shim that loads these on first use; a missing one is the usual broken install. Loaded
  // beside the CUDA driver's start (on a fresh machine each takes a good part of a second: hundreds of MB of kernels).
  auto sublibraries = std::async(std::launch::async, [] {
    std::vector<std::string> problems;
    for (const char* sub : {"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
                            "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9"}) {
      // Never dlclose these: on loading, each registers entry points with libcudnn_graph, and unloading it
      // leaves cuDNN calling into unmapped memory (a crash in cudnn::graph::LibraryLoader, seen on an H200).
      if (!dlopen(sub, RTLD_LAZY | RTLD_GLOBAL)) {
        const char* why = dlerror();
        problems.push_back(fmt::format("{} cannot be loaded: {}", sub, why ? why : "unknown error"));
      }
    }
    return problems;
  });
  r.driver_version = read_driver_version();
  if (cudaDriverGetVersion(&r.cuda_driver_api) != cudaSuccess) r.cuda_driver_api = 0;
  if (cudaRuntimeGetVersion(&r.cuda_runtime) != cudaSuccess) r.cuda_runtime = 0;

  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r.cuda_error = fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    if (err == cudaErrorInsufficientDriver && r.cuda_driver_api == 0) r.cuda_error = "no NVIDIA driver is loaded";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    count = 0;
  } else if (count == 0) {
    r.cuda_error = "the driver reports no CUDA devices";
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    GpuDevice d;
    d.ordinal = i;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.total_bytes = p.totalGlobalMem;
    d.multiprocessors = p.multiProcessorCount;
    d.fp16_tensor_cores = p.major >= 7;
    if (cudaSetDevice(i) == cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) d.free_bytes = free_b;
    }
    r.devices.push_back(d);
  }

  r.cudnn_compiled = CUDNN_VERSION;
  r.cudnn_loaded = cudnnGetVersion();
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudnnGetVersion), &info) && info.dli_fname) r.cudnn_library = info.dli_fname;
  if (r.cudnn_loaded / 10000 != r.cudnn_compiled / 10000) {
    r.cudnn_problems.push_back(fmt::format("major version mismatch: built against {}, loaded {}",
                                           cudnn_version_string(r.cudnn_compiled), cudnn_version_string(r.cudnn_loaded)));
  } else if (r.cudnn_loaded < r.cudnn_compiled) {
    r.cudnn_problems.push_back(fmt::format("loaded cuDNN {} is older than the {} it was built against",
                                           cudnn_version_string(r.cudnn_loaded), cudnn_version_string(r.cudnn_compiled)));
  }
  for (auto& problem : sublibraries.get()) r.cudnn_problems.push_back(std::move(problem));
  return r;
}

}  // namespace vc::inference
