// Timing GPU work with CUDA events: the engine's autotuner and the benchmarks share these timers.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "config/logging.hpp"
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

// The work `fn` enqueues on `stream` (and the streams it forks from it), captured into a graph. Another thread can
// invalidate a capture from outside — a call that waits on the whole context while the capture runs (seen on an H100,
// 2026-12-07: a tuned engine built beside 104 NVDEC streams starting, cudaErrorStreamCaptureInvalidated in the middle
// of a sequence that captures alone) — so an invalidated capture is made again, up to `attempts` times. Throws what
// `fn` or CUDA throws, with the capture ended.
template <typename Fn>
CudaGraph capture_graph(cudaStream_t stream, Fn&& fn, int attempts = 4) {
  for (int attempt = 1;; ++attempt) {
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    std::exception_ptr failed;
    try {
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &g);  // (ended whatever happened)
    CudaGraph graph(g);
    if (ended == cudaErrorStreamCaptureInvalidated && attempt < attempts) {
      (void)cudaGetLastError();  // (a capture's error is not sticky: nothing else is left failed)
      vc::log::get("inference")->info("a CUDA graph capture was invalidated from outside; captured again ({} of {})",
                                      attempt + 1, attempts);
      continue;
    }
    if (failed) {
      (void)cudaGetLastError();
      std::rethrow_exception(failed);
    }
    CUDA_CHECK(ended);
    return graph;
  }
}

// Median milliseconds per call of `fn` as the GPU runs it inside a CUDA graph — the way the engine runs its forward
// pass: `calls` calls captured once into a graph, one warm-up replay, then `loops` timed replays. Eager calls of a
// few-microsecond kernel measure the host's launch overhead as much as the GPU (cuDNN's host side takes longer
// than such a kernel, so the GPU waits between calls); a replay does not. Throws what `fn` or CUDA throws, with
// the capture ended.
template <typename Fn>
double median_graph_ms(cudaStream_t stream, Fn&& fn, int calls, int loops) {
  calls = std::max(calls, 1);
  const CudaGraph graph = capture_graph(stream, [&] {
    for (int i = 0; i < calls; ++i) fn();
  });
  cudaGraphExec_t e = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&e, graph, 0));
  const CudaGraphExec exec(e);
  const double ms = median_gpu_ms(stream, [&] { CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, 1, loops);
  return ms / calls;
}

// median_graph_ms with the calls per graph sized from one eager call so that a replay lasts about
// `target_ms` (between 2 and max_calls calls).
template <typename Fn>
double median_replayed_ms(cudaStream_t stream, Fn&& fn, int loops, double target_ms = 1.0, int max_calls = 20) {
  const double one = median_gpu_ms(stream, fn, 1, 1);
  const int calls = std::clamp(int(target_ms / std::max(one, 0.001)), 2, std::max(max_calls, 2));
  return median_graph_ms(stream, fn, calls, loops);
}

}  // namespace vc::inference
