#include "hangwatch/simgpu/cublas/gemm_problem.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/simgpu/numeric_formats.h"

namespace simgpu {
namespace {

bool isHalfCompute(cublasComputeType_t c) { return c == CUBLAS_COMPUTE_16F || c == CUBLAS_COMPUTE_16F_PEDANTIC; }

bool isFloatCompute(cublasComputeType_t c) {
  switch (c) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return true;
    default:
      return false;
  }
}

bool validOp(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

const char* typeTag(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F: return "f32";
    case CUDA_R_16F: return "f16";
    case CUDA_R_16BF: return "bf16";
    default: return "x";
  }
}

}  // namespace

size_t elementSize(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

float loadElement(const void* base, cudaDataType t, size_t index) {
  if (t == CUDA_R_32F) {
    float v;
    std::memcpy(&v, static_cast<const char*>(base) + index * 4, 4);
    return v;
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(base) + index * 2, 2);
  return t == CUDA_R_16F ? halfToFloat(bits) : bf16ToFloat(bits);
}

void storeElement(void* base, cudaDataType t, size_t index, float v) {
  if (t == CUDA_R_32F) {
    std::memcpy(static_cast<char*>(base) + index * 4, &v, 4);
    return;
  }
  uint16_t bits = t == CUDA_R_16F ? floatToHalf(v) : floatToBf16(v);
  std::memcpy(static_cast<char*>(base) + index * 2, &bits, 2);
}

namespace {

// op(X) is rows x cols; element (i, j) of op(X) in column-major storage.
size_t opIndex(cublasOperation_t op, int ld, int i, int j) {
  return op == CUBLAS_OP_N ? static_cast<size_t>(i) + static_cast<size_t>(j) * ld
                           : static_cast<size_t>(j) + static_cast<size_t>(i) * ld;
}

}  // namespace

float readScalar(const void* p, cublasComputeType_t compute) {
  if (isHalfCompute(compute)) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return halfToFloat(bits);
  }
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

cublasStatus_t GemmProblem::validate() const {
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (!validOp(transa) || !validOp(transb)) return CUBLAS_STATUS_INVALID_VALUE;
  int min_lda = std::max(1, transa == CUBLAS_OP_N ? m : k);
  int min_ldb = std::max(1, transb == CUBLAS_OP_N ? k : n);
  if (a.ld < min_lda || b.ld < min_ldb || ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  bool ab_same = a.type == b.type;
  bool supported = false;
  if (isFloatCompute(compute)) {
    supported = ab_same && ((a.type == CUDA_R_32F && c_type == CUDA_R_32F) ||
                            ((a.type == CUDA_R_16F || a.type == CUDA_R_16BF) && (c_type == a.type || c_type == CUDA_R_32F)));
  } else if (isHalfCompute(compute)) {
    supported = ab_same && a.type == CUDA_R_16F && c_type == CUDA_R_16F;
  }
  return supported ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

double GemmProblem::flops() const { return 2.0 * m * n * static_cast<double>(k) * batch; }

uint64_t GemmProblem::volume() const {
  return static_cast<uint64_t>(m) * static_cast<uint64_t>(n) * static_cast<uint64_t>(k) * static_cast<uint64_t>(batch);
}

std::string GemmProblem::kernelName() const {
  std::string name =
      fmt::format("simgpu_gemm_{}{}{}_{}x{}x{}", typeTag(a.type), typeTag(b.type), typeTag(c_type), m, n, k);
  if (batch != 1) fmt::format_to(std::back_inserter(name), "_b{}", batch);
  return name;
}

namespace {

// op(X) of a batch as floats, column-major and dense (rows x cols), so the inner loop below
// runs over contiguous floats whatever the storage type and transposition.
std::vector<float> denseOperand(const char* base, cudaDataType type, cublasOperation_t op, int ld, int rows,
                                int cols) {
  std::vector<float> dense(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i)
      dense[static_cast<size_t>(i) + static_cast<size_t>(j) * rows] = loadElement(base, type, opIndex(op, ld, i, j));
  return dense;
}

}  // namespace

// The sums run in the same order as a plain triple loop (for each column of C, over k), so
// the result does not depend on how the operands were stored.
void GemmProblem::computeResult() const {
  std::vector<float> column(m);
  for (int bi = 0; bi < batch; ++bi) {
    const char* a_base = static_cast<const char*>(a.data) + bi * a.stride * static_cast<long long>(elementSize(a.type));
    const char* b_base = static_cast<const char*>(b.data) + bi * b.stride * static_cast<long long>(elementSize(b.type));
    char* c_base = static_cast<char*>(c) + bi * stride_c * static_cast<long long>(elementSize(c_type));
    const std::vector<float> op_a = denseOperand(a_base, a.type, transa, a.ld, m, k);
    const std::vector<float> op_b = denseOperand(b_base, b.type, transb, b.ld, k, n);
    for (int j = 0; j < n; ++j) {
      std::fill(column.begin(), column.end(), 0.0f);
      float* __restrict out = column.data();
      for (int l = 0; l < k; ++l) {
        const float blj = op_b[static_cast<size_t>(l) + static_cast<size_t>(j) * k];
        const float* __restrict a_col = op_a.data() + static_cast<size_t>(l) * m;
        for (int i = 0; i < m; ++i) out[i] += a_col[i] * blj;
      }
      for (int i = 0; i < m; ++i) {
        size_t ci = static_cast<size_t>(i) + static_cast<size_t>(j) * ldc;
        // beta == 0 means C is not read, so NaN garbage in C does not propagate.
        float product = alpha * column[i];
        storeElement(c_base, c_type, ci, beta == 0.0f ? product : product + beta * loadElement(c_base, c_type, ci));
      }
    }
  }
}

}  // namespace simgpu
