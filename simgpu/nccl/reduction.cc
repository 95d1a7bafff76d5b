#include "hangwatch/simgpu/nccl/reduction.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "hangwatch/simgpu/numeric_formats.h"

namespace simnccl {
namespace {

using simgpu::bf16ToFloat;
using simgpu::floatToBf16;
using simgpu::floatToHalf;
using simgpu::halfToFloat;

template <typename T>
T apply(T a, T b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd:
      return static_cast<T>(a * b);
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:  // ncclSum, ncclAvg
      return static_cast<T>(a + b);
  }
}

template <typename T>
void reduceTyped(void* dst, const void* a, const void* b, size_t n, ncclRedOp_t op) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = apply<T>(x[i], y[i], op);
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void reduce16(void* dst, const void* a, const void* b, size_t n, ncclRedOp_t op) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = FromF(apply<float>(ToF(x[i]), ToF(y[i]), op));
}

template <typename T>
void divideTyped(void* buf, size_t n, int nranks) {
  T* d = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / static_cast<T>(nranks));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide16(void* buf, size_t n, int nranks) {
  uint16_t* d = static_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) d[i] = FromF(ToF(d[i]) / static_cast<float>(nranks));
}

}  // namespace

size_t dtypeSize(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool supportedRedOp(ncclRedOp_t op) {
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin || op == ncclAvg;
}

void reduceInto(void* dst, const void* a, const void* b, size_t n, ncclDataType_t dtype, ncclRedOp_t op) {
  switch (dtype) {
    case ncclInt8: return reduceTyped<int8_t>(dst, a, b, n, op);
    case ncclUint8: return reduceTyped<uint8_t>(dst, a, b, n, op);
    case ncclInt32: return reduceTyped<int32_t>(dst, a, b, n, op);
    case ncclUint32: return reduceTyped<uint32_t>(dst, a, b, n, op);
    case ncclInt64: return reduceTyped<int64_t>(dst, a, b, n, op);
    case ncclUint64: return reduceTyped<uint64_t>(dst, a, b, n, op);
    case ncclFloat32: return reduceTyped<float>(dst, a, b, n, op);
    case ncclFloat64: return reduceTyped<double>(dst, a, b, n, op);
    case ncclFloat16: return reduce16<halfToFloat, floatToHalf>(dst, a, b, n, op);
    case ncclBfloat16: return reduce16<bf16ToFloat, floatToBf16>(dst, a, b, n, op);
    default: return;
  }
}

void finalizeAverage(void* buf, size_t n, ncclDataType_t dtype, ncclRedOp_t op, int nranks) {
  if (op != ncclAvg || nranks == 1) return;
  switch (dtype) {
    case ncclInt8: return divideTyped<int8_t>(buf, n, nranks);
    case ncclUint8: return divideTyped<uint8_t>(buf, n, nranks);
    case ncclInt32: return divideTyped<int32_t>(buf, n, nranks);
    case ncclUint32: return divideTyped<uint32_t>(buf, n, nranks);
    case ncclInt64: return divideTyped<int64_t>(buf, n, nranks);
    case ncclUint64: return divideTyped<uint64_t>(buf, n, nranks);
    case ncclFloat32: return divideTyped<float>(buf, n, nranks);
    case ncclFloat64: return divideTyped<double>(buf, n, nranks);
    case ncclFloat16: return divide16<halfToFloat, floatToHalf>(buf, n, nranks);
    case ncclBfloat16: return divide16<bf16ToFloat, floatToBf16>(buf, n, nranks);
    default: return;
  }
}

}  // namespace simnccl
