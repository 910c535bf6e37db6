#include "inference/cuda/cuda_check.hpp"

#include <fmt/format.h>

#include "config/errors.hpp"

namespace vc::inference::detail {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  const auto where = fmt::format("{} at {}:{}", expr, file, line);
  if (err == cudaErrorMemoryAllocation) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    throw UnavailableError(fmt::format("GPU out of memory ({:.1f} MiB free of {:.1f} MiB): {}", free_b / 1048576.0,
                                       total_b / 1048576.0, where));
  }
  throw InternalError(fmt::format("CUDA error {} ({}): {}", cudaGetErrorName(err), cudaGetErrorString(err), where));
}

void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line) {
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  throw InternalError(fmt::format("cuDNN error {}: {} at {}:{}{}{}", cudnnGetErrorString(status), expr, file, line,
                                  detail[0] ? " — " : "", detail));
}

}  // namespace vc::inference::detail
