#include "bench/nvml_sampler.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>

namespace vc::bench {

// The few NVML entry points used, as nvml.h declares them (a stable C ABI; the toolkit here ships no nvml.h).
struct NvmlSampler::Api {
  struct Utilization {
    unsigned int gpu, memory;
  };
  void* library = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned int*) = nullptr;
  int (*handle)(unsigned int, void**) = nullptr;
  int (*decoder)(void*, unsigned int*, unsigned int*) = nullptr;
  int (*rates)(void*, Utilization*) = nullptr;
  template <typename F>
  bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(library, name));
    return f != nullptr;
  }
};

NvmlSampler::NvmlSampler(std::chrono::milliseconds every) {
  auto* api = new Api;
  api->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  unsigned int n = 0;
  if (!api->library || !api->find(api->init, "nvmlInit_v2") || !api->find(api->shutdown, "nvmlShutdown") ||
      !api->find(api->count, "nvmlDeviceGetCount_v2") || !api->find(api->handle, "nvmlDeviceGetHandleByIndex_v2") ||
      !api->find(api->decoder, "nvmlDeviceGetDecoderUtilization") || !api->find(api->rates, "nvmlDeviceGetUtilizationRates") ||
      api->init() != 0 || api->count(&n) != 0) {
    if (api->library) dlclose(api->library);
    delete api;
    return;
  }
  api_ = api;
  for (unsigned int i = 0; i < n; ++i) {
    void* h = nullptr;
    if (api_->handle(i, &h) == 0) {
      devices_.push_back(h);
      sums_.push_back({int(i)});
    }
  }
  thread_ = std::thread([this, every] {
    while (!done_) {
      {
        std::lock_guard lock(mutex_);
        for (size_t i = 0; i < devices_.size(); ++i) {
          unsigned int dec = 0, period = 0;
          Api::Utilization u{};
          if (api_->decoder(devices_[i], &dec, &period) != 0 || api_->rates(devices_[i], &u) != 0) continue;
          auto& s = sums_[i];
          ++s.samples;
          s.decoder_mean += dec;  // (sums until stop())
          s.sm_mean += u.gpu;
          s.decoder_max = std::max(s.decoder_max, double(dec));
          s.sm_max = std::max(s.sm_max, double(u.gpu));
        }
      }
      std::this_thread::sleep_for(every);
    }
  });
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    api_->shutdown();
    dlclose(api_->library);
    delete api_;
  }
}

std::vector<GpuUtilisation> NvmlSampler::stop() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  std::vector<GpuUtilisation> out = sums_;
  for (auto& s : out) {
    if (s.samples == 0) continue;
    s.decoder_mean /= s.samples;
    s.sm_mean /= s.samples;
  }
  return out;
}

GpuMemorySampler::GpuMemorySampler() {
  baseline_ = used();
  thread_ = std::thread([this] {
    while (!done_) {
      peak_ = std::max(peak_.load(), used());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

GpuMemorySampler::~GpuMemorySampler() { stop(); }

double GpuMemorySampler::stop_mib() {
  stop();
  return peak_ > baseline_ ? double(peak_ - baseline_) / 1048576.0 : 0;
}

size_t GpuMemorySampler::used() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return total_b - free_b;
}

void GpuMemorySampler::stop() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace vc::bench
