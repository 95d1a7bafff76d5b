#pragma once
// NCCL's profiler plugin interface, version 4 (NCCL 2.25), which NCCL 2.28 still loads
// when a plugin has no `ncclProfiler_v5` (src/plugin/profiler/profiler_v4.cc). Only the
// descriptor (a one-byte type, no API events, a Coll/P2p's parent is the Group event)
// and init's argument order differ from v5; the states and their arguments are v5's.
// The layouts are NCCL's ABI (src/include/plugin/profiler/profiler_v4.h; checked
// against libnccl.so.2's DWARF by tests/reallib/profiler_abi_check.cc).
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include <nccl.h>

#include "hangwatch/common/nccl_profiler_v5.h"

namespace hangwatch::nccl_profiler {

struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

struct ProfilerV4 {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, EventState eState, EventStateArgs* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

inline constexpr const char* kSymbolV4 = "ncclProfiler_v4";

}  // namespace hangwatch::nccl_profiler
