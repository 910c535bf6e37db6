#include "inference/cuda/engine/plan_compiler.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "config/errors.hpp"
#include "inference/cuda/cuda_check.hpp"
#include "inference/cuda/cuda_memory.hpp"
#include "config/logging.hpp"

namespace vc::inference {

int default_compile_threads() {
  return std::clamp(int(std::thread::hardware_concurrency()) / 2, 1, 8);
}

std::vector<CompiledPlan> compile_plans(int device, const std::vector<PlanShape>& shapes, int max_plans,
                                        bool deterministic, int threads, const std::atomic<bool>* cancel) {
  // Candidates in rank order across the shapes: the best-ranked (most likely kept) are compiled first.
  std::vector<std::pair<size_t, int>> jobs;
  for (int index = 0; index < max_plans; ++index) {
    for (size_t s = 0; s < shapes.size(); ++s) jobs.emplace_back(s, index);
  }
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::vector<CompiledPlan> out;
  std::string failure;
  auto log = vc::log::get("inference");
  const auto work = [&] {
    try {
      CUDA_CHECK(cudaSetDevice(device));
      cudnnHandle_t raw = nullptr;
      CUDNN_CHECK(cudnnCreate(&raw));
      const CudnnHandle handle(raw);
      std::map<size_t, std::unique_ptr<GraphConv>> graphs;  // (null: cuDNN cannot express the shape)
      for (;;) {
        const size_t j = next++;
        if (j >= jobs.size() || (cancel && cancel->load())) return;
        const auto [s, index] = jobs[j];
        auto it = graphs.find(s);
        if (it == graphs.end()) {
          std::unique_ptr<GraphConv> g;
          try {
            g = std::make_unique<GraphConv>(handle.get(), shapes[s].shape, deterministic);
          } catch (const InternalError& e) {
            log->debug("{}: graph API unavailable ({})", shapes[s].key, e.what());
          }
          it = graphs.emplace(s, std::move(g)).first;
        }
        GraphConv* g = it->second.get();
        if (!g || index >= g->candidate_count() || !g->compiles_at_runtime(index)) continue;
        try {
          if (!g->build(index)) continue;
          auto plan = g->serialize(index);
          if (plan.empty()) continue;
          const std::lock_guard lock(mutex);
          out.push_back({shapes[s].key, index, std::move(plan)});
        } catch (const std::exception& e) {
          log->debug("{}: graph plan {} not compiled beside ({})", shapes[s].key, index, e.what());
        }
      }
    } catch (const std::exception& e) {
      const std::lock_guard lock(mutex);
      if (failure.empty()) failure = e.what();
    }
  };
  std::vector<std::thread> pool;
  const int count = std::clamp(threads, 1, std::max(1, int(jobs.size())));
  for (int t = 0; t < count; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (!failure.empty()) throw InternalError("compiling graph plans: " + failure);
  return out;
}

}  // namespace vc::inference
