// RAII owners of CUDA and cuDNN resources: move-only, destructors never throw.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <utility>

#include "inference/cuda/cuda_check.hpp"

namespace vc::inference {

// Memory from one CUDA allocator: move-only, freed by its destructor. Allocation failure throws
// (UnavailableError for out-of-memory, from CUDA_CHECK).
template <typename T, cudaError_t (*Allocate)(void**, size_t), cudaError_t (*Free)(void*)>
class CudaAllocation {
 public:
  CudaAllocation() = default;
  explicit CudaAllocation(size_t count) : count_(count) {
    if (count) CUDA_CHECK(Allocate(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~CudaAllocation() {
    if (ptr_) Free(ptr_);
  }
  CudaAllocation(CudaAllocation&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  CudaAllocation& operator=(CudaAllocation&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  CudaAllocation(const CudaAllocation&) = delete;
  CudaAllocation& operator=(const CudaAllocation&) = delete;

  [[nodiscard]] T* get() const { return ptr_; }
  [[nodiscard]] size_t size() const { return count_; }
  [[nodiscard]] size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

namespace detail {
inline cudaError_t device_alloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
inline cudaError_t pinned_alloc(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
}  // namespace detail

// Device memory.
template <typename T>
using DeviceBuffer = CudaAllocation<T, detail::device_alloc, cudaFree>;
// Page-locked host memory, for asynchronous copies.
template <typename T>
using PinnedBuffer = CudaAllocation<T, detail::pinned_alloc, cudaFreeHost>;

// A generic owner for handle types with a create/destroy pair.
template <typename Handle, auto Destroy>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle h) : h_(h) {}
  ~UniqueHandle() {
    if (h_) Destroy(h_);
  }
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  [[nodiscard]] Handle get() const { return h_; }
  operator Handle() const { return h_; }

 private:
  Handle h_{};
};

using CudaStream = UniqueHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEvent = UniqueHandle<cudaEvent_t, cudaEventDestroy>;
using CudaGraph = UniqueHandle<cudaGraph_t, cudaGraphDestroy>;
using CudaGraphExec = UniqueHandle<cudaGraphExec_t, cudaGraphExecDestroy>;
using CudnnHandle = UniqueHandle<cudnnHandle_t, cudnnDestroy>;
using TensorDesc = UniqueHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = UniqueHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = UniqueHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc = UniqueHandle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// Stream priorities: live batches run on `kLive` streams, an engine being built (its autotuning: a model swapped in
// while others classify) on `kBuild` ones, so that the SMs hand their next blocks to the live work first.
enum class StreamPriority { kBuild, kLive };
inline CudaStream make_stream(StreamPriority priority = StreamPriority::kBuild) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking,
                                          priority == StreamPriority::kLive ? greatest : least));
  return CudaStream(s);
}
// Copies host memory to the device and returns once it has landed there. A plain cudaMemcpy from pageable memory
// may return while its DMA is still under way, and kernels on the non-blocking streams above do not wait for the
// legacy stream it runs on: they could read the buffer half-written.
inline void copy_to_device(void* device, const void* host, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}
// cudaEventDefault times; cudaEventDisableTiming for events that only order streams.
inline CudaEvent make_event(unsigned flags = cudaEventDefault) {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
  return CudaEvent(e);
}

}  // namespace vc::inference
