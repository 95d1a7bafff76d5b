// cuBLAS entry points. A GEMM is device work on the handle's stream: it computes
// the real result up to SIMGPU_GEMM_COMPUTE_LIMIT (m*n*k*batch) and always takes
// the modeled time 2*m*n*k*batch / (SIMGPU_TFLOPS * device speed).
#include <cublas_v2.h>

#include <chrono>

#include "hangwatch/simgpu/cublas/blas_context.h"
#include "hangwatch/simgpu/cublas/gemm_problem.h"
#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/runtime.h"

using simgpu::GemmProblem;
using simgpu::liveBlasContext;

namespace {

cublasStatus_t runGemm(cublasHandle_t handle, GemmProblem problem, const void* alpha, const void* beta) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (cublasStatus_t status = problem.validate(); status != CUBLAS_STATUS_SUCCESS) return status;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (problem.empty()) return CUBLAS_STATUS_SUCCESS;
  // Device pointer mode reads the same way: simgpu device memory is host memory.
  problem.alpha = simgpu::readScalar(alpha, problem.compute);
  problem.beta = simgpu::readScalar(beta, problem.compute);
  auto modeled = std::chrono::nanoseconds(
      static_cast<int64_t>(problem.flops() / (simgpu::simConfig().tflops * 1e12) * 1e9));
  // Above the limit the result is NOT computed (C is left as it was): only the time is modeled.
  bool compute = problem.volume() <= simgpu::simConfig().gemm_compute_limit;
  std::string name = problem.kernelName();
  simgpu::DeviceWork work = [problem, modeled, compute] {
    if (compute) problem.computeResult();
    simgpu::occupyDevice(modeled);
  };
  cudaError_t queued = simgpu::enqueue(context->stream, name.c_str(), std::move(work));
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = simgpu::createBlasContext(simgpu::currentDevice());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  return simgpu::destroyBlasContext(handle) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  context->stream = streamId;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = context->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// The workspace is the caller's memory for cuBLAS's kernels; simgpu's GEMMs need none.
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t workspaceSizeInBytes) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace == nullptr && workspaceSizeInBytes != 0) return CUBLAS_STATUS_INVALID_VALUE;
  context->workspace = workspace;
  context->workspace_bytes = workspaceSizeInBytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  context->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = context->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  context->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
  cublasContext* context = liveBlasContext(handle);
  if (context == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = context->pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown error";
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  GemmProblem p;
  p.transa = transa;
  p.transb = transb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a = {A, Atype, lda, strideA};
  p.b = {B, Btype, ldb, strideB};
  p.c = C;
  p.c_type = Ctype;
  p.ldc = ldc;
  p.stride_c = strideC;
  p.batch = batchCount;
  p.compute = computeType;
  return runGemm(handle, p, alpha, beta);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta,
                                    C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  return cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                      CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // extern "C"
