// cuBLAS and cuBLASLt GEMMs: always timed, with their shape for FLOPS.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cerrno>

#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/real_api.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/timed_call.h"
#include "hangwatch/watchdog/watchdog.h"

using namespace hangwatch::watchdog;

namespace {

// cublas_api.h overloads these two for C++ (cudaDataType compute types); name the C ones.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const void*, const void*, cudaDataType, int, long long int, const void*,
                                         cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                         long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
NextSymbol<GemmExFn> next_gemm_ex{"cublasGemmEx"};
NextSymbol<GemmStridedFn> next_gemm_strided{"cublasGemmStridedBatchedEx"};
NextSymbol<decltype(&cublasSgemm_v2)> next_sgemm{"cublasSgemm_v2"};
NextSymbol<decltype(&cublasLtMatmul)> next_lt_matmul{"cublasLtMatmul"};

cudaStream_t handleStream(cublasHandle_t handle) {
  cudaStream_t stream = nullptr;
  if (auto get = RealApi::instance().cublasGetStream.get()) get(handle, &stream);
  return stream;
}

struct GemmShape {
  int64_t m, n, k, batch;
  int32_t dtype;
};

template <typename Call>
cublasStatus_t timedGemm(const char* name, cudaStream_t stream, const GemmShape& shape, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  return timedCall(
      w, stream, CUBLAS_STATUS_SUCCESS, call,
      [&](PendingOp& op) {
        op.op.cls = OpClass::kGemm;
        op.op.name = name;
        op.op.m = shape.m;
        op.op.n = shape.n;
        op.op.k = shape.k;
        op.op.batch = shape.batch;
        op.op.flops = 2.0 * static_cast<double>(shape.m) * shape.n * shape.k * shape.batch;
        op.dtype = shape.dtype;
      },
      [&](uint64_t capture) { w->graphs().noteCaptured(capture, CapturedOp{name, false, 0, 0, shape.dtype, 0, -1}); });
}

template <typename T>
T layoutAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, T fallback) {
  auto get = RealApi::instance().ltLayoutGetAttribute.get();
  T value = fallback;
  size_t written = 0;
  if (get == nullptr || layout == nullptr || get(layout, attr, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS)
    return fallback;
  return value;
}

GemmShape ltShape(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t d) {
  GemmShape s{};
  s.m = static_cast<int64_t>(layoutAttribute<uint64_t>(d, CUBLASLT_MATRIX_LAYOUT_ROWS, 0));
  s.n = static_cast<int64_t>(layoutAttribute<uint64_t>(d, CUBLASLT_MATRIX_LAYOUT_COLS, 0));
  int32_t transa = CUBLAS_OP_N;
  if (auto get = RealApi::instance().ltMatmulDescGetAttribute.get(); get && desc) {
    size_t written = 0;
    get(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa, &written);
  }
  // op(A) is m x k: A's columns unless A is transposed.
  s.k = static_cast<int64_t>(layoutAttribute<uint64_t>(
      a, transa == CUBLAS_OP_N ? CUBLASLT_MATRIX_LAYOUT_COLS : CUBLASLT_MATRIX_LAYOUT_ROWS, 0));
  s.batch = std::max<int64_t>(1, layoutAttribute<int32_t>(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1));
  s.dtype = static_cast<int32_t>(layoutAttribute<uint32_t>(d, CUBLASLT_MATRIX_LAYOUT_TYPE, 0));
  return s;
}

}  // namespace

extern "C" {

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  auto real = next_gemm_ex.get();
  if (real == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [&] {
    return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                computeType, algo);
  };
  if (ReentryGuard::nested() || Watchdog::get() == nullptr) return call();
  return timedGemm("cublasGemmEx", handleStream(handle), GemmShape{m, n, k, 1, Atype}, call);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  auto real = next_gemm_strided.get();
  if (real == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [&] {
    return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                Ctype, ldc, strideC, batchCount, computeType, algo);
  };
  if (ReentryGuard::nested() || Watchdog::get() == nullptr) return call();
  return timedGemm("cublasGemmStridedBatchedEx", handleStream(handle), GemmShape{m, n, k, batchCount, Atype}, call);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  auto real = next_sgemm.get();
  if (real == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [&] { return real(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); };
  if (ReentryGuard::nested() || Watchdog::get() == nullptr) return call();
  return timedGemm("cublasSgemm_v2", handleStream(handle), GemmShape{m, n, k, 1, CUDA_R_32F}, call);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream) {
  // No cuBLASLt behind us (simgpu has none): the caller cannot have a valid handle.
  auto real = next_lt_matmul.get();
  if (real == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [&] {
    return real(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                workspaceSizeInBytes, stream);
  };
  if (ReentryGuard::nested() || Watchdog::get() == nullptr) return call();
  return timedGemm("cublasLtMatmul", stream, ltShape(computeDesc, Adesc, Ddesc), call);
}

}  // extern "C"
