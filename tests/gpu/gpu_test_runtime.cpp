// The GPU runtime itself: cuDNN loads and creates a handle; device memory round-trips.
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include <random>
#include <vector>

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

TEST_SUITE_END();
