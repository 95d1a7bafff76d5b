#include "hangwatch/simgpu/cuda/last_error.h"

namespace simgpu {
namespace {
thread_local cudaError_t t_last_error = cudaSuccess;
}

cudaError_t recordError(cudaError_t error) {
  if (error != cudaSuccess && error != cudaErrorNotReady) t_last_error = error;
  return error;
}

cudaError_t takeLastError() {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t peekLastError() { return t_last_error; }

}  // namespace simgpu
