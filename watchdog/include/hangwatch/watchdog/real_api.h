#pragma once
// The CUDA/cuBLAS/NCCL calls the watchdog makes on its own behalf, always to the
// real (next) library, never back into our interposers.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "hangwatch/watchdog/next_symbol.h"

namespace hangwatch::watchdog {

struct RealApi {
  NextSymbol<cudaError_t (*)(cudaEvent_t*, unsigned)> eventCreateWithFlags{"cudaEventCreateWithFlags"};
  NextSymbol<cudaError_t (*)(cudaEvent_t)> eventDestroy{"cudaEventDestroy"};
  NextSymbol<cudaError_t (*)(cudaEvent_t, cudaStream_t)> eventRecord{"cudaEventRecord"};
  NextSymbol<cudaError_t (*)(cudaEvent_t)> eventQuery{"cudaEventQuery"};
  NextSymbol<cudaError_t (*)(float*, cudaEvent_t, cudaEvent_t)> eventElapsedTime{"cudaEventElapsedTime"};
  NextSymbol<cudaError_t (*)(int*)> getDevice{"cudaGetDevice"};
  NextSymbol<cudaError_t (*)(int)> setDevice{"cudaSetDevice"};
  NextSymbol<cudaError_t (*)()> getLastError{"cudaGetLastError"};
  NextSymbol<cudaError_t (*)()> peekAtLastError{"cudaPeekAtLastError"};
  NextSymbol<cudaError_t (*)(cudaStream_t, int*)> streamGetDevice{"cudaStreamGetDevice"};
  // CUDA 13's signature; CUDA 12's 3-argument one (stream, status, id) is called compatibly.
  NextSymbol<cudaError_t (*)(cudaStream_t, cudaStreamCaptureStatus*, unsigned long long*, cudaGraph_t*,
                             const cudaGraphNode_t**, const cudaGraphEdgeData**, size_t*)>
      streamGetCaptureInfo{"cudaStreamGetCaptureInfo"};
  NextSymbol<cudaError_t (*)(cudaStream_t*, unsigned)> streamCreateWithFlags{"cudaStreamCreateWithFlags"};
  NextSymbol<cudaError_t (*)(const char**, const void*)> funcGetName{"cudaFuncGetName"};
  NextSymbol<cudaError_t (*)(const char*, void**, unsigned, unsigned long long, cudaDriverEntryPointQueryResult*)>
      getDriverEntryPointByVersion{"cudaGetDriverEntryPointByVersion"};
  NextSymbol<cublasStatus_t (*)(cublasHandle_t, cudaStream_t*)> cublasGetStream{"cublasGetStream_v2"};
  NextSymbol<cublasStatus_t (*)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, void*, size_t, size_t*)>
      ltLayoutGetAttribute{"cublasLtMatrixLayoutGetAttribute"};
  NextSymbol<cublasStatus_t (*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void*, size_t, size_t*)>
      ltMatmulDescGetAttribute{"cublasLtMatmulDescGetAttribute"};
  NextSymbol<ncclResult_t (*)(ncclComm_t)> commAbort{"ncclCommAbort"};
  NextSymbol<ncclResult_t (*)(const ncclComm_t, int*)> commUserRank{"ncclCommUserRank"};
  NextSymbol<ncclResult_t (*)(const ncclComm_t, int*)> commCount{"ncclCommCount"};
  NextSymbol<ncclResult_t (*)(const ncclComm_t, int*)> commCuDevice{"ncclCommCuDevice"};
  NextSymbol<ncclResult_t (*)(ncclComm_t, ncclResult_t*)> commGetAsyncError{"ncclCommGetAsyncError"};

  static RealApi& instance();
};

}  // namespace hangwatch::watchdog
