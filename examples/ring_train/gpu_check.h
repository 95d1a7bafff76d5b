#pragma once
// The one way the examples fail on a GPU-library error: name the rank, the call and
// the library's status, then take the whole job down (a lone rank exiting would
// leave the other ranks hung, which is not what these programs are meant to show).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#include "bootstrap.h"

struct CheckIdentity {
  static inline const char* program = "train";
  static inline int rank = -1;
  static inline Bootstrap* bootstrap = nullptr;  // how to end the job; MPI_Abort when unset
};

[[noreturn]] inline void abortJob(int code) {
  if (CheckIdentity::bootstrap) CheckIdentity::bootstrap->abort(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

[[noreturn]] inline void failGpuCall(const char* call, const char* status, const char* detail, const char* file,
                                     int line) {
  std::fprintf(stderr, "%s rank=%d error: %s failed: %s%s%s at %s:%d\n", CheckIdentity::program,
               CheckIdentity::rank, call, status, *detail ? ": " : "", detail, file, line);
  std::fflush(stderr);
  abortJob(1);
}

#define CUDA_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const cudaError_t status_ = (call);                                                                    \
    if (status_ != cudaSuccess) failGpuCall(#call, cudaGetErrorString(status_), "", __FILE__, __LINE__);  \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                          \
  do {                                                                                                              \
    const cublasStatus_t status_ = (call);                                                                          \
    if (status_ != CUBLAS_STATUS_SUCCESS) failGpuCall(#call, cublasGetStatusString(status_), "", __FILE__, __LINE__); \
  } while (0)

#define NCCL_CHECK(call)                                                                                   \
  do {                                                                                                     \
    const ncclResult_t status_ = (call);                                                                   \
    if (status_ != ncclSuccess)                                                                            \
      failGpuCall(#call, ncclGetErrorString(status_), ncclGetLastError(nullptr), __FILE__, __LINE__);      \
  } while (0)

// A call on a non-blocking communicator (config.blocking = 0) may answer ncclInProgress:
// then, as NCCL's documentation asks, poll ncclCommGetAsyncError until it is no longer
// in progress before the next call on that communicator.
#define NCCL_CHECK_ON(comm, call)                                                                          \
  do {                                                                                                     \
    ncclResult_t status_ = (call);                                                                         \
    while (status_ == ncclInProgress) {                                                                    \
      ncclResult_t state_ = ncclInProgress;                                                                \
      if (ncclCommGetAsyncError((comm), &state_) != ncclSuccess) state_ = ncclInternalError;               \
      status_ = state_;                                                                                    \
    }                                                                                                      \
    if (status_ != ncclSuccess)                                                                            \
      failGpuCall(#call, ncclGetErrorString(status_), ncclGetLastError(nullptr), __FILE__, __LINE__);      \
  } while (0)

// `count` floats on the current device; the job ends if they cannot be had.
inline float* deviceFloats(size_t count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, count * sizeof(float)));
  return static_cast<float*>(p);
}
