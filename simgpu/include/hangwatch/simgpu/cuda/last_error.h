#pragma once
// The calling thread's last runtime error, as cudaGetLastError reports it.
#include <cuda_runtime_api.h>

namespace simgpu {

// Records a failed call's error (cudaErrorNotReady is a status, not an error) and
// returns `error`, so every API can end in `return recordError(...)`.
cudaError_t recordError(cudaError_t error);
cudaError_t takeLastError();
cudaError_t peekLastError();

}  // namespace simgpu
