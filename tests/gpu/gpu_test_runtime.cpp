// The GPU runtime itself: cuDNN loads and creates a handle; device memory round-trips; a CUDA graph capture that
// something invalidates is made again (capture_graph), and one invalidated every time gives up with the error.
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include <random>
#include <vector>

#include "inference/cuda/cuda_memory.hpp"
#include "inference/cuda/engine/gpu_timer.hpp"
#include "test_helpers.hpp"

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
// Random floats on the device (src), a buffer as large for a copy of them (dst), the copy, and what dst holds.
struct CopyBuffers {
  std::vector<float> host = vc::test::random_floats(size_t(1) << 16);
  vc::inference::DeviceBuffer<float> src{host.size()}, dst{host.size()};
  CopyBuffers() {
    vc::inference::copy_to_device(src.get(), host.data(), src.bytes());
    REQUIRE(cudaMemset(dst.get(), 0, dst.bytes()) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  // src -> dst, enqueued on `stream`.
  cudaError_t copy_on(cudaStream_t stream) {
    return cudaMemcpyAsync(dst.get(), src.get(), src.bytes(), cudaMemcpyDeviceToDevice, stream);
  }
  [[nodiscard]] std::vector<float> copied() const {
    std::vector<float> back(dst.size(), -2.f);
    REQUIRE(cudaMemcpy(back.data(), dst.get(), dst.bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
    return back;
  }
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
    REQUIRE(buffers.copy_on(stream) == cudaSuccess);
  });
  CHECK(attempts == 2);
  REQUIRE(graph.get() != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  vc::inference::CudaGraphExec owned(exec);
  REQUIRE(cudaGraphLaunch(owned, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(buffers.copied() == buffers.host);
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
  REQUIRE(buffers.copy_on(stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(buffers.copied() == buffers.host);
}

TEST_SUITE_END();
