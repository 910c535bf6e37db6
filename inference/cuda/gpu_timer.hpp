// Timing GPU work with CUDA events: the engine's autotuner and the benchmarks share this one timer.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"

namespace vc::inference {

// Median milliseconds per call of `fn` (which enqueues work on `stream`): `warmup` untimed calls, then `loops`
// timed loops of `calls_per_loop` calls each. Several calls per loop amortize the event resolution (~0.5 us).
template <typename Fn>
double median_gpu_ms(cudaStream_t stream, Fn&& fn, int warmup, int loops, int calls_per_loop = 1) {
  for (int i = 0; i < warmup; ++i) fn();
  CudaEvent start = make_event(), stop = make_event();
  std::vector<double> per_call;
  for (int l = 0; l < std::max(loops, 1); ++l) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < calls_per_loop; ++r) fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    per_call.push_back(double(ms) / calls_per_loop);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace vc::inference
