// Samples every GPU's NVDEC and SM utilisation through NVML while a benchmark runs (nvidia-smi dmon's numbers), so
// that each figure says where its limit was. NVML is the driver's library (libnvidia-ml.so.1), loaded at run time:
// without a driver the sampler is simply empty.
#pragma once
#include <atomic>
#include <cstddef>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace vc::bench {

struct GpuUtilisation {
  int gpu = 0;
  int samples = 0;
  double decoder_mean = 0, decoder_max = 0;  // NVDEC busy, percent
  double sm_mean = 0, sm_max = 0;            // kernels running, percent
};

class NvmlSampler {
 public:
  explicit NvmlSampler(std::chrono::milliseconds every = std::chrono::milliseconds(500));
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;
  // Stops sampling; one entry per GPU (none without NVML). Samples taken while a GPU was idle count too: start and
  // stop the sampler around the window to measure.
  std::vector<GpuUtilisation> stop();

 private:
  struct Api;
  Api* api_ = nullptr;
  std::vector<void*> devices_;
  std::mutex mutex_;
  std::vector<GpuUtilisation> sums_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Samples the GPU's used memory while a run goes on (cudaMemGetInfo, every 100 ms); the peak is the run's footprint
// (above the idle baseline).
class GpuMemorySampler {
 public:
  GpuMemorySampler();
  ~GpuMemorySampler();
  GpuMemorySampler(const GpuMemorySampler&) = delete;
  GpuMemorySampler& operator=(const GpuMemorySampler&) = delete;
  double stop_mib();

 private:
  static size_t used();
  void stop();
  size_t baseline_ = 0;
  std::atomic<size_t> peak_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace vc::bench
