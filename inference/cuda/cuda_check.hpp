// One check macro per status type. A failed CUDA or cuDNN call throws vc::InternalError naming the call,
// file and line (the app exits 70); an out-of-memory throws vc::UnavailableError with what was free.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace vc::inference::detail {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line);

}  // namespace vc::inference::detail

#define CUDA_CHECK(expr)                                                                        \
  do {                                                                                          \
    const cudaError_t vc_err_ = (expr);                                                         \
    if (vc_err_ != cudaSuccess) ::vc::inference::detail::throw_cuda_error(vc_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUDNN_CHECK(expr)                                                                       \
  do {                                                                                          \
    const cudnnStatus_t vc_st_ = (expr);                                                        \
    if (vc_st_ != CUDNN_STATUS_SUCCESS) ::vc::inference::detail::throw_cudnn_error(vc_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch's own error (bad configuration etc.).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
