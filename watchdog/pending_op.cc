#include "hangwatch/watchdog/pending_op.h"

#include <nccl.h>

namespace hangwatch::watchdog {

const char* pendingOpClassName(OpClass c) {
  switch (c) {
    case OpClass::kCollective: return "collective";
    case OpClass::kP2P: return "p2p";
    case OpClass::kGemm: return "gemm";
    case OpClass::kKernel: return "kernel";
    case OpClass::kMemcpy: return "memcpy";
    case OpClass::kGraph: return "graph";
  }
  return "kernel";
}

const char* ncclDtypeName(int32_t dtype) {
  switch (dtype) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    default: return "";
  }
}

size_t ncclDtypeSize(int32_t dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 1;  // fp8 and future types: at least count bytes
  }
}

}  // namespace hangwatch::watchdog
