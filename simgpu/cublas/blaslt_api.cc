// cuBLASLt's matmul subset (what PyTorch's Linear layers call): descriptors, layouts,
// preferences, the heuristic, and cublasLtMatmul as device work on the given stream, computed
// like a cuBLAS GEMM (gemm_problem.h) with the bias and activation epilogues applied to D.
//
// A cublasLtHandle_t is a live cuBLAS context: cublasLtCreate makes one, and a cublasHandle_t
// cast to cublasLtHandle_t is accepted too, as PyTorch passes it (cuBLAS's handle starts with
// its Lt handle). Descriptors live inside the public opaque structs (their size is part of the
// API, callers may place them on the stack). What is not modelled is refused, never ignored:
// row-major or planar layouts, fp8 scale pointers, the AUX and DGELU/DRELU epilogues.
#include <cublasLt.h>
#include <cublas_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/cublas/blas_context.h"
#include "hangwatch/simgpu/cublas/gemm_problem.h"
#include "hangwatch/simgpu/runtime.h"

namespace {

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType scale_type = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N;
  int32_t transb = CUBLAS_OP_N;
  int32_t transc = CUBLAS_OP_N;
  int32_t fill_mode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = -1;  // -1: D's type
  int32_t sm_count_target = 0;
  int8_t fast_accum = 0;
};
static_assert(sizeof(MatmulDesc) <= sizeof(cublasLtMatmulDescOpaque_t));

struct Layout {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  int64_t batch_stride = 0;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));

struct Preference {
  uint32_t search_mode = 0;
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t min_alignment[4] = {256, 256, 256, 256};
  float max_waves = 0.0f;
  uint64_t impl_mask = ~uint64_t{0};
};
static_assert(sizeof(Preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t));

MatmulDesc& desc(cublasLtMatmulDesc_t d) { return *reinterpret_cast<MatmulDesc*>(d); }
Layout& layout(cublasLtMatrixLayout_t l) { return *reinterpret_cast<Layout*>(l); }
Preference& pref(cublasLtMatmulPreference_t p) { return *reinterpret_cast<Preference*>(p); }

bool liveHandle(cublasLtHandle_t handle) {
  return simgpu::liveBlasContext(reinterpret_cast<cublasHandle_t>(handle)) != nullptr;
}

// One attribute: where it lives in the struct and its size in the API.
struct Field {
  int attr;
  size_t offset;
  size_t size;
};

template <typename T, size_t N>
cublasStatus_t setField(T& object, const Field (&fields)[N], int attr, const void* buf, size_t size) {
  for (const Field& f : fields) {
    if (f.attr != attr) continue;
    if (buf == nullptr || size != f.size) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(reinterpret_cast<char*>(&object) + f.offset, buf, f.size);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

template <typename T, size_t N>
cublasStatus_t getField(const T& object, const Field (&fields)[N], int attr, void* buf, size_t size,
                        size_t* written) {
  for (const Field& f : fields) {
    if (f.attr != attr) continue;
    if (size == 0 && written != nullptr) {
      *written = f.size;
      return CUBLAS_STATUS_SUCCESS;
    }
    if (buf == nullptr || size != f.size) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(buf, reinterpret_cast<const char*>(&object) + f.offset, f.size);
    if (written != nullptr) *written = f.size;
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

#define FIELD(attr, type, member) \
  Field { attr, offsetof(type, member), sizeof(type::member) }

const Field kDescFields[] = {
    FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, MatmulDesc, compute),
    FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, MatmulDesc, scale_type),
    FIELD(CUBLASLT_MATMUL_DESC_POINTER_MODE, MatmulDesc, pointer_mode),
    FIELD(CUBLASLT_MATMUL_DESC_TRANSA, MatmulDesc, transa),
    FIELD(CUBLASLT_MATMUL_DESC_TRANSB, MatmulDesc, transb),
    FIELD(CUBLASLT_MATMUL_DESC_TRANSC, MatmulDesc, transc),
    FIELD(CUBLASLT_MATMUL_DESC_FILL_MODE, MatmulDesc, fill_mode),
    FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, MatmulDesc, epilogue),
    FIELD(CUBLASLT_MATMUL_DESC_BIAS_POINTER, MatmulDesc, bias),
    FIELD(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, MatmulDesc, bias_batch_stride),
    FIELD(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, MatmulDesc, bias_type),
    FIELD(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, MatmulDesc, sm_count_target),
    FIELD(CUBLASLT_MATMUL_DESC_FAST_ACCUM, MatmulDesc, fast_accum),
};

const Field kLayoutFields[] = {
    FIELD(CUBLASLT_MATRIX_LAYOUT_TYPE, Layout, type),
    FIELD(CUBLASLT_MATRIX_LAYOUT_ORDER, Layout, order),
    FIELD(CUBLASLT_MATRIX_LAYOUT_ROWS, Layout, rows),
    FIELD(CUBLASLT_MATRIX_LAYOUT_COLS, Layout, cols),
    FIELD(CUBLASLT_MATRIX_LAYOUT_LD, Layout, ld),
    FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, Layout, batch_count),
    FIELD(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, Layout, batch_stride),
};

const Field kPreferenceFields[] = {
    FIELD(CUBLASLT_MATMUL_PREF_SEARCH_MODE, Preference, search_mode),
    FIELD(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, Preference, max_workspace),
    FIELD(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, Preference, reduction_mask),
    Field{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, offsetof(Preference, min_alignment), sizeof(uint32_t)},
    Field{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, offsetof(Preference, min_alignment) + 4, sizeof(uint32_t)},
    Field{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, offsetof(Preference, min_alignment) + 8, sizeof(uint32_t)},
    Field{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, offsetof(Preference, min_alignment) + 12, sizeof(uint32_t)},
    FIELD(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, Preference, max_waves),
    FIELD(CUBLASLT_MATMUL_PREF_IMPL_MASK, Preference, impl_mask),
};

#undef FIELD

// Attributes that change what is computed and that simgpu does not model: refused when set.
bool unmodelledDescAttribute(int attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
      return true;
    default:
      return false;
  }
}

bool modelledEpilogue(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB:
      return true;
    default:
      return false;
  }
}

// cuBLASLt's GELU is the tanh approximation.
float gelu(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

// The call, checked at call time: D = epilogue(alpha * op(A) op(B) + beta * C), with the
// dimensions the layouts give (column-major), in the types cuBLAS's GEMMs support.
struct LtCall {
  simgpu::GemmProblem gemm;  // computes into D (C is copied there first when it is read and differs)
  const void* c = nullptr;
  Layout c_layout;
  MatmulDesc d;
  cudaDataType bias_type = CUDA_R_32F;
};

cublasStatus_t describe(const MatmulDesc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl,
                        LtCall& call) {
  for (const Layout* l : {&a, &b, &c, &dl})
    if (l->order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!modelledEpilogue(d.epilogue) || d.transc != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  auto ta = static_cast<cublasOperation_t>(d.transa), tb = static_cast<cublasOperation_t>(d.transb);
  uint64_t m = dl.rows, n = dl.cols;
  uint64_t k = ta == CUBLAS_OP_N ? a.cols : a.rows;
  if ((ta == CUBLAS_OP_N ? a.rows : a.cols) != m || (tb == CUBLAS_OP_N ? b.rows : b.cols) != k ||
      (tb == CUBLAS_OP_N ? b.cols : b.rows) != n || c.rows != m || c.cols != n || c.type != dl.type)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || c.ld < static_cast<int64_t>(std::max<uint64_t>(m, 1)))
    return CUBLAS_STATUS_INVALID_VALUE;
  int batch = dl.batch_count;
  for (const Layout* l : {&a, &b, &c})
    if (l->batch_count != batch && l->batch_count != 1) return CUBLAS_STATUS_INVALID_VALUE;
  simgpu::GemmProblem& g = call.gemm;
  g.transa = ta;
  g.transb = tb;
  g.m = static_cast<int>(m);
  g.n = static_cast<int>(n);
  g.k = static_cast<int>(k);
  g.a = {nullptr, static_cast<cudaDataType>(a.type), static_cast<int>(a.ld), a.batch_count == 1 ? 0 : a.batch_stride};
  g.b = {nullptr, static_cast<cudaDataType>(b.type), static_cast<int>(b.ld), b.batch_count == 1 ? 0 : b.batch_stride};
  g.c_type = static_cast<cudaDataType>(dl.type);
  g.ldc = static_cast<int>(dl.ld);
  g.stride_c = dl.batch_stride;
  g.batch = batch;
  g.compute = d.compute;
  if (cublasStatus_t s = g.validate(); s != CUBLAS_STATUS_SUCCESS) return s;
  call.c_layout = c;
  call.d = d;
  call.bias_type = d.bias_type < 0 ? g.c_type : static_cast<cudaDataType>(d.bias_type);
  if ((d.epilogue & CUBLASLT_EPILOGUE_BIAS) || (d.epilogue & (CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB))) {
    if (call.bias_type != CUDA_R_32F && call.bias_type != CUDA_R_16F && call.bias_type != CUDA_R_16BF)
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

void copyC(const LtCall& call) {
  const simgpu::GemmProblem& g = call.gemm;
  size_t size = simgpu::elementSize(g.c_type);
  for (int bi = 0; bi < g.batch; ++bi) {
    const char* src = static_cast<const char*>(call.c) +
                      (call.c_layout.batch_count == 1 ? 0 : bi * call.c_layout.batch_stride) * static_cast<long long>(size);
    char* dst = static_cast<char*>(g.c) + bi * g.stride_c * static_cast<long long>(size);
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i)
        simgpu::storeElement(dst, g.c_type, static_cast<size_t>(i) + static_cast<size_t>(j) * g.ldc,
                             simgpu::loadElement(src, g.c_type, static_cast<size_t>(i) + static_cast<size_t>(j) *
                                                                                             call.c_layout.ld));
  }
}

// Bias (length m, added to every column) and the activation, element by element of D.
void applyEpilogue(const LtCall& call) {
  const simgpu::GemmProblem& g = call.gemm;
  uint32_t e = call.d.epilogue;
  bool bias = (e & CUBLASLT_EPILOGUE_BIAS) != 0 && call.d.bias != nullptr;
  bool relu = (e & CUBLASLT_EPILOGUE_RELU) != 0, act_gelu = (e & CUBLASLT_EPILOGUE_GELU) != 0;
  if (!bias && !relu && !act_gelu) return;
  size_t size = simgpu::elementSize(g.c_type);
  for (int bi = 0; bi < g.batch; ++bi) {
    char* base = static_cast<char*>(g.c) + bi * g.stride_c * static_cast<long long>(size);
    const char* bias_base = static_cast<const char*>(call.d.bias) +
                            bi * call.d.bias_batch_stride * static_cast<long long>(simgpu::elementSize(call.bias_type));
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) {
        size_t index = static_cast<size_t>(i) + static_cast<size_t>(j) * g.ldc;
        float v = simgpu::loadElement(base, g.c_type, index);
        if (bias) v += simgpu::loadElement(bias_base, call.bias_type, i);
        if (relu) v = v > 0.0f ? v : 0.0f;
        if (act_gelu) v = gelu(v);
        simgpu::storeElement(base, g.c_type, index, v);
      }
    }
  }
}

// BGRADA: the bias gradient is op(A) summed over k (length m); BGRADB: op(B) over k (length n).
void biasGradient(const LtCall& call) {
  const simgpu::GemmProblem& g = call.gemm;
  uint32_t e = call.d.epilogue;
  if (!(e & (CUBLASLT_EPILOGUE_BGRADA | CUBLASLT_EPILOGUE_BGRADB)) || call.d.bias == nullptr) return;
  bool from_a = (e & CUBLASLT_EPILOGUE_BGRADA) != 0;
  const simgpu::GemmOperand& x = from_a ? g.a : g.b;
  cublasOperation_t op = from_a ? g.transa : g.transb;
  int length = from_a ? g.m : g.n;
  for (int r = 0; r < length; ++r) {
    float sum = 0.0f;
    for (int l = 0; l < g.k; ++l) {
      // op(A) is m x k (element (r, l)); op(B) is k x n (element (l, r)).
      int row = from_a ? r : l, col = from_a ? l : r;
      size_t index = op == CUBLAS_OP_N ? static_cast<size_t>(row) + static_cast<size_t>(col) * x.ld
                                       : static_cast<size_t>(col) + static_cast<size_t>(row) * x.ld;
      sum += simgpu::loadElement(x.data, x.type, index);
    }
    simgpu::storeElement(const_cast<void*>(call.d.bias), call.bias_type, r, sum);
  }
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = reinterpret_cast<cublasLtHandle_t>(simgpu::createBlasContext(simgpu::currentDevice()));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  return simgpu::destroyBlasContext(reinterpret_cast<cublasHandle_t>(lightHandle)) ? CUBLAS_STATUS_SUCCESS
                                                                                  : CUBLAS_STATUS_NOT_INITIALIZED;
}

size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }  // cuBLASLt ships with and is versioned as cuBLAS

size_t cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new cublasLtMatmulDescOpaque_t{};
  auto* d = new (opaque) MatmulDesc();
  d->compute = computeType;
  d->scale_type = scaleType;
  *matmulDesc = opaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (unmodelledDescAttribute(attr)) return CUBLAS_STATUS_NOT_SUPPORTED;
  return setField(desc(matmulDesc), kDescFields, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return getField(desc(matmulDesc), kDescFields, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (matLayout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new cublasLtMatrixLayoutOpaque_t{};
  auto* l = new (opaque) Layout();
  l->type = type;
  l->rows = rows;
  l->cols = cols;
  l->ld = ld;
  *matLayout = opaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t matLayout) {
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t sizeInBytes) {
  if (matLayout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET || attr == CUBLASLT_MATRIX_LAYOUT_BATCH_MODE)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return setField(layout(matLayout), kLayoutFields, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t sizeInBytes,
                                                size_t* sizeWritten) {
  if (matLayout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return getField(layout(matLayout), kLayoutFields, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new cublasLtMatmulPreferenceOpaque_t{};
  new (opaque) Preference();
  *preference = opaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return setField(pref(preference), kPreferenceFields, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return getField(pref(preference), kPreferenceFields, attr, buf, sizeInBytes, sizeWritten);
}

// One algorithm, needing no workspace, for every problem simgpu can compute.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  if (!liveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr ||
      operationDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr || Ddesc == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  LtCall call;
  if (describe(desc(operationDesc), layout(Adesc), layout(Bdesc), layout(Cdesc), layout(Ddesc), call) !=
      CUBLAS_STATUS_SUCCESS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulHeuristicResult_t& result = heuristicResultsArray[0];
  std::memset(&result, 0, sizeof(result));
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle, cublasComputeType_t computeType,
                                      cudaDataType_t scaleType, cudaDataType_t Atype, cudaDataType_t Btype,
                                      cudaDataType_t Ctype, cudaDataType_t Dtype, int algoId,
                                      cublasLtMatmulAlgo_t* algo) {
  if (!liveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo == nullptr || algoId < 0) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(algo, 0, sizeof(*algo));
  algo->data[0] = static_cast<uint64_t>(algoId);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  if (!liveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (operationDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr || Ddesc == nullptr ||
      algo == nullptr || result == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  LtCall call;
  cublasStatus_t s = describe(desc(operationDesc), layout(Adesc), layout(Bdesc), layout(Cdesc), layout(Ddesc), call);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  cublasLtMatmulAlgo_t copy = *algo;  // `algo` may point into `result`
  std::memset(result, 0, sizeof(*result));
  result->algo = copy;
  result->state = CUBLAS_STATUS_SUCCESS;
  result->wavesCount = 1.0f;
  return CUBLAS_STATUS_SUCCESS;
}

// The configuration attributes (id, tile, split-k, ...) are kept one per word of the algo,
// the two 16-bit ones together in the last: they choose among kernels simgpu does not have.
cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  if (algo == nullptr || buf == nullptr || attr < CUBLASLT_ALGO_CONFIG_ID || attr > CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)
    return CUBLAS_STATUS_INVALID_VALUE;
  size_t expected = attr >= CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID ? 2 : 4;
  if (sizeInBytes != expected || attr == CUBLASLT_ALGO_CONFIG_ID) return CUBLAS_STATUS_INVALID_VALUE;
  char* slot = reinterpret_cast<char*>(&algo->data[attr < 7 ? attr : 7]) + (attr == 8 ? 2 : 0);
  std::memcpy(slot, buf, expected);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
  if (algo == nullptr || attr < CUBLASLT_ALGO_CONFIG_ID || attr > CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)
    return CUBLAS_STATUS_INVALID_VALUE;
  size_t expected = attr >= CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID ? 2 : 4;
  if (sizeInBytes == 0 && sizeWritten != nullptr) {
    *sizeWritten = expected;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || sizeInBytes != expected) return CUBLAS_STATUS_INVALID_VALUE;
  const char* slot = reinterpret_cast<const char*>(&algo->data[attr < 7 ? attr : 7]) + (attr == 8 ? 2 : 0);
  std::memcpy(buf, slot, expected);
  if (sizeWritten != nullptr) *sizeWritten = expected;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!liveHandle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (computeDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr || Ddesc == nullptr ||
      alpha == nullptr || beta == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  LtCall call;
  cublasStatus_t s = describe(desc(computeDesc), layout(Adesc), layout(Bdesc), layout(Cdesc), layout(Ddesc), call);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  simgpu::GemmProblem& g = call.gemm;
  if (g.empty()) return CUBLAS_STATUS_SUCCESS;
  g.a.data = A;
  g.b.data = B;
  g.c = D;
  call.c = C;
  // Device pointer mode reads the same way: simgpu device memory is host memory.
  g.alpha = simgpu::readScalar(alpha, g.compute);
  g.beta = simgpu::readScalar(beta, g.compute);
  auto modeled = std::chrono::nanoseconds(static_cast<int64_t>(g.flops() / (simgpu::simConfig().tflops * 1e12) * 1e9));
  // Above the limit nothing is computed (D is left as it was): only the time is modeled.
  bool compute = g.volume() <= simgpu::simConfig().gemm_compute_limit;
  std::string name = g.kernelName();
  simgpu::DeviceWork work = [call, modeled, compute] {
    if (compute) {
      if (call.gemm.beta != 0.0f && call.c != call.gemm.c) copyC(call);
      call.gemm.computeResult();
      applyEpilogue(call);
      biasGradient(call);
    }
    simgpu::occupyDevice(modeled);
  };
  cudaError_t queued = simgpu::enqueue(stream, name.c_str(), std::move(work));
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
