#pragma once
// One timed operation between issue and completion: the issue-side record the
// interposers push (trivially copyable, no allocation) and the poller's view of it.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "hangwatch/watchdog/metrics/op_record.h"

namespace hangwatch::watchdog {

// What PendingOp::kernel_func is, so the poller asks the right API for its name.
enum class KernelHandle : uint8_t {
  kFunction,        // the host stub passed to cudaLaunchKernel (cudaFuncGetName)
  kKernel,          // a cudaKernel_t from __cudaGetKernel, as nvcc's <<<>>> launches (cuKernelGetName)
  kDriverFunction,  // a CUfunction passed to cuLaunchKernel[Ex] (cuFuncGetName)
};

struct PendingOp {
  CompletedOp op;
  cudaEvent_t start_event = nullptr;
  cudaEvent_t end_event = nullptr;
  const void* kernel_func = nullptr;  // generic kernels: name resolved by the poller
  KernelHandle kernel_kind = KernelHandle::kFunction;
  uintptr_t comm = 0;                 // ncclComm_t of communication ops
  cudaStream_t stream_handle = nullptr;  // as the caller passed it (grouped NCCL ops are timed at group end)
  int32_t dtype = -1;                 // ncclDataType_t or cudaDataType, -1 when none
  uint64_t count = 0;                 // elements as passed to NCCL
  int device = -1;                    // the device its events belong to (DeviceTimers)
  // Filled by the poller.
  bool gpu_started = false;
  int64_t front_since_ns = 0;         // when it became the oldest pending op of its stream
};

const char* pendingOpClassName(OpClass c);
const char* ncclDtypeName(int32_t dtype);
size_t ncclDtypeSize(int32_t dtype);

}  // namespace hangwatch::watchdog
