// Compiled graph-API plans kept across starts, beside the algorithm cache (algo_cache.hpp): cuDNN compiles its
// runtime-fusion engines' kernels when a plan is built (seconds per layer shape on a fresh machine), and can
// serialize a built plan; a later start loads it instead of compiling it again.
// A folder next to the algorithm cache (algorithms.json -> algorithms.plans/): one file per plan, named by its key's
// hash and starting with the key, and machine.json, what the plans were compiled for — the GPU, its driver, cuDNN
// and the cuDNN frontend. Plans of another machine are ignored (one info line), and replaced by the first plan saved.
// Every file is written atomically; a missing, unreadable or foreign plan is simply compiled again.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vc::inference {

class PlanCache {
 public:
  // `algorithm_cache`: the algorithm cache's path ("" = none: nothing kept). `machine`: what this process's plans are
  // compiled for (machine_identity()).
  PlanCache(const std::string& algorithm_cache, std::string machine);
  [[nodiscard]] std::optional<std::vector<uint8_t>> find(const std::string& key) const;
  // Never throws (a plan that cannot be kept is compiled again next time; one warning).
  void put(const std::string& key, const std::vector<uint8_t>& plan);
  [[nodiscard]] const std::string& folder() const { return folder_; }

 private:
  std::string file_of(const std::string& key) const;
  std::string folder_;
  std::string machine_;
  bool usable_ = false;    // the folder's plans are this machine's
  bool warned_ = false;
};

// "NVIDIA H100 80GB HBM3 sm90 | driver 580.95.05 (CUDA 13000) | cuDNN 91400 | frontend 13200" for the GPU `prop`
// describes.
std::string machine_identity(const cudaDeviceProp& prop);

}  // namespace vc::inference
