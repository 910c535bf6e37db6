// The GPU runtime itself: cuDNN loads and creates a handle; device memory round-trips; a CUDA graph capture that
// something invalidates is made again (capture_graph), and one invalidated every time gives up with the error.
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include <random>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine/gpu_timer.hpp"

TEST_SUITE_BEGIN("gpu.runtime");

TEST_CASE("cuDNN creates a handle on this GPU") {
  cudnnHandle_t handle = nullptr;
  const auto status = cudnnCreate(&handle);
  CAPTURE(cudnnGetErrorString(status));
  REQUIRE(status == CUDNN_STATUS_SUCCESS);
  CHECK(cudnnDestroy(handle) == CUDNN_STATUS_SUCCESS);
}

TEST_CASE("device memory round-trips random data") {
  std::vector<float> host(1 << 20), back(host.size(), -1.f);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& v : host) v = dist(rng);
  float* dev = nullptr;
  REQUIRE(cudaMalloc(&dev, host.size() * sizeof(float)) == cudaSuccess);
  CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(back.data(), dev, host.size() * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(cudaFree(dev) == cudaSuccess);
  CHECK(back == host);
}

namespace {
// Random floats on the device, and a buffer as large for a copy of them.
struct CopyBuffers {
  std::vector<float> host = std::vector<float>(1 << 16);
  float* src = nullptr;
  float* dst = nullptr;
  CopyBuffers() {
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (auto& v : host) v = dist(rng);
    REQUIRE(cudaMalloc(&src, bytes()) == cudaSuccess);
    REQUIRE(cudaMalloc(&dst, bytes()) == cudaSuccess);
    vc::inference::copy_to_device(src, host.data(), bytes());
    REQUIRE(cudaMemset(dst, 0, bytes()) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  ~CopyBuffers() {
    cudaFree(src);
    cudaFree(dst);
  }
  [[nodiscard]] size_t bytes() const { return host.size() * sizeof(float); }
};
// What makes a capture invalid here: synchronizing the stream being captured (as a module loaded or a context-wide
// wait in the middle of a capture does). The call itself fails, and the capture is invalidated.
void invalidate_capture(cudaStream_t stream) {
  CHECK(cudaStreamSynchronize(stream) != cudaSuccess);
  (void)cudaGetLastError();
}
}  // namespace

TEST_CASE("a graph capture invalidated on its first attempt is made again and replays the work") {
  CopyBuffers buffers;
  vc::inference::CudaStream stream = vc::inference::make_stream();
  int attempts = 0;
  vc::inference::CudaGraph graph = vc::inference::capture_graph(stream, [&] {
    if (++attempts == 1) {  // (the stream's calls fail until the capture ends: nothing more this attempt)
      invalidate_capture(stream);
      return;
    }
    REQUIRE(cudaMemcpyAsync(buffers.dst, buffers.src, buffers.bytes(), cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  });
  CHECK(attempts == 2);
  REQUIRE(graph.get() != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  vc::inference::CudaGraphExec owned(exec);
  REQUIRE(cudaGraphLaunch(owned, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::vector<float> back(buffers.host.size(), -2.f);
  REQUIRE(cudaMemcpy(back.data(), buffers.dst, buffers.bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == buffers.host);
}

TEST_CASE("a graph capture invalidated every time gives up after its attempts, the stream no longer capturing") {
  CopyBuffers buffers;
  vc::inference::CudaStream stream = vc::inference::make_stream();
  int attempts = 0;
  const auto capture = [&] {
    return vc::inference::capture_graph(
        stream,
        [&] {
          ++attempts;
          invalidate_capture(stream);
        },
        3);
  };
  CHECK_THROWS_WITH(capture(), doctest::Contains("cudaErrorStreamCaptureInvalidated"));
  CHECK(attempts == 3);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  REQUIRE(cudaStreamIsCapturing(stream, &capturing) == cudaSuccess);
  CHECK(capturing == cudaStreamCaptureStatusNone);
  // The stream works as before: a copy on it lands.
  REQUIRE(cudaMemcpyAsync(buffers.dst, buffers.src, buffers.bytes(), cudaMemcpyDeviceToDevice, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::vector<float> back(buffers.host.size(), -2.f);
  REQUIRE(cudaMemcpy(back.data(), buffers.dst, buffers.bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == buffers.host);
}

TEST_SUITE_END();
