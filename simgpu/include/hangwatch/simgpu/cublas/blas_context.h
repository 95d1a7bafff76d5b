#pragma once
// What a cublasHandle_t points to, and the registry of live handles so a destroyed
// or garbage handle is answered with CUBLAS_STATUS_NOT_INITIALIZED instead of a crash.
#include <cublas_api.h>

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
  int device = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace simgpu {

cublasHandle_t createBlasContext(int device);
bool destroyBlasContext(cublasHandle_t handle);
// Null unless `handle` is live.
cublasContext* liveBlasContext(cublasHandle_t handle);

}  // namespace simgpu
