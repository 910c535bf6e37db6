// RAII owners of CUDA and cuDNN resources: move-only, destructors never throw.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <utility>

#include "inference/cuda_check.hpp"

namespace vc::inference {

// Device memory. Allocation failure throws (UnavailableError for out-of-memory).
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  [[nodiscard]] T* get() const { return ptr_; }
  [[nodiscard]] size_t size() const { return count_; }
  [[nodiscard]] size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// Page-locked host memory, for asynchronous copies.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t count) : count_(count) {
    if (count) CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  [[nodiscard]] T* get() const { return ptr_; }
  [[nodiscard]] size_t size() const { return count_; }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

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

inline CudaStream make_stream() {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return CudaStream(s);
}
inline CudaEvent make_event() {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreate(&e));
  return CudaEvent(e);
}

}  // namespace vc::inference
