#pragma once
// One cuBLAS GEMM call, validated and captured at call time (alpha and beta
// included) so it can run later on the handle's stream: column-major
// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for each batch b.
#include <cublas_api.h>

#include <cstdint>
#include <string>

namespace simgpu {

struct GemmOperand {
  const void* data = nullptr;
  cudaDataType type = CUDA_R_32F;
  int ld = 0;
  long long stride = 0;  // elements between batches
};

struct GemmProblem {
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  GemmOperand a, b;
  void* c = nullptr;
  cudaDataType c_type = CUDA_R_32F;
  int ldc = 0;
  long long stride_c = 0;
  int batch = 1;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  float alpha = 1.0f;
  float beta = 0.0f;

  // CUBLAS_STATUS_INVALID_VALUE for bad sizes, leading dimensions or operations,
  // CUBLAS_STATUS_NOT_SUPPORTED for a type combination cuBLAS does not offer.
  cublasStatus_t validate() const;
  bool empty() const { return m == 0 || n == 0 || batch == 0; }
  double flops() const;
  uint64_t volume() const;  // m*n*k*batch, what SIMGPU_GEMM_COMPUTE_LIMIT is compared to
  // e.g. "simgpu_gemm_bf16bf16f32_1024x1024x512" (+ "_b8" when batched).
  std::string kernelName() const;
  void computeResult() const;
};

// Reads a scalar (alpha or beta) in the representation `compute` prescribes.
float readScalar(const void* p, cublasComputeType_t compute);

// Element `index` of an array of `type` (CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF) as float, and back.
float loadElement(const void* base, cudaDataType type, size_t index);
void storeElement(void* base, cudaDataType type, size_t index, float value);
size_t elementSize(cudaDataType type);

}  // namespace simgpu
