// cuBLASLt's matmul on simgpu, called as PyTorch calls it: a cuBLAS handle cast to a cuBLASLt
// handle, descriptors with attributes, the heuristic's algorithm, bias and activation epilogues.
#include <catch2/catch.hpp>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

std::vector<float> randomMatrix(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

float opElement(const std::vector<float>& x, cublasOperation_t op, int ld, int i, int j) {
  return op == CUBLAS_OP_N ? x[i + j * ld] : x[j + i * ld];
}

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS); }
  ~Handle() { cublasDestroy(h); }
  // What PyTorch hands cuBLASLt (aten/src/ATen/cuda/CublasHandlePool.cpp).
  cublasLtHandle_t lt() const { return reinterpret_cast<cublasLtHandle_t>(h); }
};

struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  Descriptors(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc, int ldd) {
    REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    int32_t t = ta;
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)) == CUBLAS_STATUS_SUCCESS);
    t = tb;
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof(t)) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, m, n, ldc) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, m, n, ldd) == CUBLAS_STATUS_SUCCESS);
  }
  ~Descriptors() {
    cublasLtMatmulDescDestroy(op);
    for (auto l : {a, b, c, d}) cublasLtMatrixLayoutDestroy(l);
  }
  void epilogue(cublasLtEpilogue_t e, const void* bias) {
    uint32_t value = e;
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &value, sizeof(value)) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) ==
            CUBLAS_STATUS_SUCCESS);
  }
};

// PyTorch's sequence: a preference with a workspace limit, the heuristic's first algorithm, the matmul.
cublasStatus_t heuristicMatmul(const Handle& handle, Descriptors& desc, const float* alpha, const void* a,
                               const void* b, const float* beta, const void* c, void* d) {
  cublasLtMatmulPreference_t pref = nullptr;
  REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
  uint64_t workspace = 1 << 20;
  REQUIRE(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof(workspace)) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle.lt(), desc.op, desc.a, desc.b, desc.c, desc.d, pref, 1,
                                                    &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  REQUIRE(returned == 1);
  REQUIRE(result.state == CUBLAS_STATUS_SUCCESS);
  REQUIRE(result.workspaceSize <= workspace);
  s = cublasLtMatmul(handle.lt(), desc.op, alpha, a, desc.a, b, desc.b, beta, c, desc.c, d, desc.d, &result.algo,
                     nullptr, 0, nullptr);
  if (s == CUBLAS_STATUS_SUCCESS) REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return s;
}

}  // namespace

TEST_CASE("LtMatmulWithBiasMatchesReferenceForEveryTransposeCombination") {
  Handle handle;
  const int m = 11, n = 7, k = 5;
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      int lda = (ta == CUBLAS_OP_N ? m : k) + 1, ldb = (tb == CUBLAS_OP_N ? k : n) + 2, ldd = m + 3;
      auto a = randomMatrix(size_t(lda) * (ta == CUBLAS_OP_N ? k : m), 11);
      auto b = randomMatrix(size_t(ldb) * (tb == CUBLAS_OP_N ? n : k), 12);
      auto bias = randomMatrix(m, 13);
      std::vector<float> d(size_t(ldd) * n, 7.0f);
      Descriptors desc(ta, tb, m, n, k, lda, ldb, ldd, ldd);
      desc.epilogue(CUBLASLT_EPILOGUE_BIAS, bias.data());
      float alpha = 2.0f, beta = 0.0f;
      REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
              CUBLAS_STATUS_SUCCESS);
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          double sum = 0;
          for (int l = 0; l < k; ++l) sum += opElement(a, ta, lda, i, l) * opElement(b, tb, ldb, l, j);
          REQUIRE(d[i + j * ldd] == Approx(alpha * sum + bias[i]).margin(1e-4));
        }
      REQUIRE(d[m] == 7.0f);  // padding between columns untouched
    }
  }
}

TEST_CASE("LtActivationEpiloguesApplyAfterTheBias") {
  Handle handle;
  const int m = 4, n = 3, k = 2;
  auto a = randomMatrix(m * k, 21), b = randomMatrix(k * n, 22), bias = randomMatrix(m, 23);
  for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU}) {
    std::vector<float> d(m * n, 0.0f);
    Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, m, k, m, m);
    desc.epilogue(e, bias.data());
    float alpha = 1.0f, beta = 0.0f;
    REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
            CUBLAS_STATUS_SUCCESS);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double x = 0;
        for (int l = 0; l < k; ++l) x += a[i + l * m] * b[l + j * k];
        if (e != CUBLASLT_EPILOGUE_GELU) x += bias[i];
        double expected = e == CUBLASLT_EPILOGUE_RELU_BIAS
                              ? std::max(0.0, x)
                              : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        REQUIRE(d[i + j * m] == Approx(expected).margin(1e-5));
      }
  }
}

TEST_CASE("LtBiasGradientEpiloguesSumTheOperandOverK") {
  Handle handle;
  const int m = 5, n = 4, k = 6;
  auto a = randomMatrix(m * k, 31), b = randomMatrix(k * n, 32);
  std::vector<float> d(m * n), grad_a(m, 99.0f), grad_b(n, 99.0f);
  float alpha = 1.0f, beta = 0.0f;
  {
    Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, m, k, m, m);
    desc.epilogue(CUBLASLT_EPILOGUE_BGRADA, grad_a.data());
    REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
            CUBLAS_STATUS_SUCCESS);
  }
  {
    Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, m, k, m, m);
    desc.epilogue(CUBLASLT_EPILOGUE_BGRADB, grad_b.data());
    REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
            CUBLAS_STATUS_SUCCESS);
  }
  for (int i = 0; i < m; ++i) {
    double sum = 0;
    for (int l = 0; l < k; ++l) sum += a[i + l * m];
    REQUIRE(grad_a[i] == Approx(sum).margin(1e-5));
  }
  for (int j = 0; j < n; ++j) {
    double sum = 0;
    for (int l = 0; l < k; ++l) sum += b[l + j * k];
    REQUIRE(grad_b[j] == Approx(sum).margin(1e-5));
  }
}

TEST_CASE("LtReadsCAndWritesADifferentD") {
  Handle handle;
  const int m = 3, n = 2, k = 2, ldc = 5, ldd = 4;
  auto a = randomMatrix(m * k, 41), b = randomMatrix(k * n, 42), c = randomMatrix(ldc * n, 43);
  const auto c_before = c;
  std::vector<float> d(ldd * n, 0.0f);
  Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, m, k, ldc, ldd);
  float alpha = 1.0f, beta = 0.5f;
  REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, c.data(), d.data()) ==
          CUBLAS_STATUS_SUCCESS);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double x = 0;
      for (int l = 0; l < k; ++l) x += a[i + l * m] * b[l + j * k];
      REQUIRE(d[i + j * ldd] == Approx(x + 0.5 * c[i + j * ldc]).margin(1e-5));
    }
  REQUIRE(c == c_before);
}

TEST_CASE("LtStridedBatchesAreEachComputed") {
  Handle handle;
  const int m = 3, n = 2, k = 4, batch = 3;
  auto a = randomMatrix(m * k * batch, 51), b = randomMatrix(k * n * batch, 52);
  std::vector<float> d(m * n * batch, 0.0f);
  Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, m, k, m, m);
  int32_t count = batch;
  for (auto [layout, stride] : {std::pair{desc.a, int64_t{m * k}}, std::pair{desc.b, int64_t{k * n}},
                                std::pair{desc.c, int64_t{m * n}}, std::pair{desc.d, int64_t{m * n}}}) {
    REQUIRE(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                             sizeof(stride)) == CUBLAS_STATUS_SUCCESS);
  }
  float alpha = 1.0f, beta = 0.0f;
  REQUIRE(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
          CUBLAS_STATUS_SUCCESS);
  for (int bi = 0; bi < batch; ++bi)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double x = 0;
        for (int l = 0; l < k; ++l) x += a[bi * m * k + i + l * m] * b[bi * k * n + l + j * k];
        REQUIRE(d[bi * m * n + i + j * m] == Approx(x).margin(1e-5));
      }
}

TEST_CASE("LtAttributesCheckTheirSizeReadBackAndRefuseWhatIsNotModelled") {
  cublasLtMatmulDesc_t op = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  int32_t transa = CUBLAS_OP_T;
  int64_t wrong_size = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &wrong_size, sizeof(wrong_size)) ==
        CUBLAS_STATUS_INVALID_VALUE);
  REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)) ==
          CUBLAS_STATUS_SUCCESS);
  int32_t read = 0;
  size_t written = 0;
  REQUIRE(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &read, sizeof(read), &written) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(read == CUBLAS_OP_T);
  CHECK(written == sizeof(int32_t));
  const void* scale = &read;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof(scale)) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulDescDestroy(op);

  cublasLtMatrixLayout_t layout = nullptr;
  REQUIRE(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 8, 4, 8) == CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0;
  REQUIRE(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), nullptr) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(rows == 8);
  uint32_t type = 0;
  REQUIRE(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof(type), nullptr) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(type == CUDA_R_16BF);
  cublasLtMatrixLayoutDestroy(layout);
}

TEST_CASE("LtHeuristicRefusesWhatSimgpuCannotCompute") {
  Handle handle;
  Descriptors desc(CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, 4);
  int32_t row_major = CUBLASLT_ORDER_ROW;
  REQUIRE(cublasLtMatrixLayoutSetAttribute(desc.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &row_major, sizeof(row_major)) ==
          CUBLAS_STATUS_SUCCESS);
  std::vector<float> a(16), b(16), d(16);
  float alpha = 1.0f, beta = 0.0f;
  CHECK(heuristicMatmul(handle, desc, &alpha, a.data(), b.data(), &beta, d.data(), d.data()) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_CASE("LtHandlesFromCublasLtCreateWorkAndDestroyedOnesAreRefused") {
  cublasLtHandle_t lt = nullptr;
  REQUIRE(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t algo{};
  CHECK(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 6,
                               &algo) == CUBLAS_STATUS_SUCCESS);
  int32_t id = -1;
  CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), nullptr) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(id == 6);
  REQUIRE(cublasLtDestroy(lt) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 6,
                               &algo) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasLtGetVersion() == CUBLAS_VERSION);
}
