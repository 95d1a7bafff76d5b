#pragma once
// Element-wise reductions over NCCL's data types; half and bfloat16 are reduced in
// float and rounded back to nearest-even, one operation at a time.
#include <nccl.h>

#include <cstddef>

namespace simnccl {

size_t dtypeSize(ncclDataType_t dtype);  // 0 for types simnccl does not support
bool supportedRedOp(ncclRedOp_t op);

// dst[i] = a[i] (op) b[i]; avg accumulates as sum (see finalizeAverage).
void reduceInto(void* dst, const void* a, const void* b, size_t count, ncclDataType_t dtype, ncclRedOp_t op);

// Divides the fully reduced sum by nranks when op is ncclAvg; no-op otherwise.
void finalizeAverage(void* buf, size_t count, ncclDataType_t dtype, ncclRedOp_t op, int nranks);

}  // namespace simnccl
