#pragma once
// NCCL's profiler plugin interface, version 5 (NCCL 2.26+): libhangwatch.so exports
// `ncclProfiler_v5` so NCCL reports network proxy steps (one per transfer on a
// connection), and simnccl drives any such plugin the same way. The layouts are NCCL's
// ABI (ext-profiler/README.md of NCCL; tests/reallib/profiler_abi_check.cc checks them
// against libnccl.so.2's DWARF): keep them exact.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include <nccl.h>

namespace hangwatch::nccl_profiler {

// Event types (eActivationMask bits and EventDescr::type).
enum : uint64_t {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,
  kCollApi = 1 << 9,
  kP2pApi = 1 << 10,
  kKernelLaunch = 1 << 11,
};

// The states of ncclProfilerEventState_t (an int-sized C enum) that NCCL 2.28 still
// records: proxy operations, proxy steps, the proxy thread, kernel channels and the
// group API.
enum EventState : int {
  kProxyStepSendGPUWait = 8,   // waiting for the GPU to fill the step
  kProxyStepSendWait = 9,      // handed to the network, waiting for it to complete
  kProxyStepRecvWait = 10,     // waiting for the data from the network
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,  // waiting for the GPU to consume the step
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgress = 19,     // ncclProfilerProxyOpInProgress_v4: the proxy took the operation up
  kProxyStepSendPeerWait = 20, // data ready, isend not yet accepted (the receiver's credit)
  kNetPluginUpdate = 21,
  kKernelChStop = 22,          // a kernel channel finished (args: kernelCh.pTimer)
  kGroupStartApiStop = 23,     // ncclGroupStart() returned (a GroupApi event)
  kGroupEndApiStart = 24,      // ncclGroupEnd() was entered
};

// The mask bits for which NCCL 2.28 emits an event of `type`: an event is also sent as
// the implied parent of what was asked for (src/plugin/profiler.cc: groupApiMask,
// collApiMask, p2pApiMask, ncclProfilerStartGroupEvent, ncclProfilerStartTaskEvents,
// ncclProfilerStart{ProxyOp,*ProxyStep,KernelCh}Event, ncclProfilerCallback).
constexpr uint64_t emittingMask(uint64_t type) {
  constexpr uint64_t kProxyStepBits = kProxyStep | kNetPlugin;
  constexpr uint64_t kProxyOpBits = kProxyOp | kProxyStepBits;
  constexpr uint64_t kTaskBits = kProxyOpBits | kKernelCh;
  switch (type) {
    case kGroupApi:
      return kGroupApi | kP2pApi | kCollApi | kKernelLaunch | kGroup | kColl | kP2p | kTaskBits;
    case kCollApi: return kCollApi | kColl | kTaskBits;
    case kP2pApi: return kP2pApi | kP2p | kTaskBits;
    case kKernelLaunch: return kKernelLaunch;
    case kGroup: return kGroup | kColl | kP2p | kTaskBits;
    case kColl: return kColl | kTaskBits;
    case kP2p: return kP2p | kTaskBits;
    case kProxyOp: return kProxyOpBits;
    case kProxyStep: return kProxyStepBits;
    case kProxyCtrl: return kProxyCtrl;
    case kKernelCh: return kKernelCh;
    case kNetPlugin: return kNetPlugin;
    default: return 0;
  }
}

struct EventDescr {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
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
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;        // the remote rank, in the communicator
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

union EventStateArgs {
  struct {
    size_t transSize;  // bytes of this step
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};

using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct ProfilerV5 {
  const char* name;
  // Once per communicator; commId is the same on every member.
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescr* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, EventState eState, EventStateArgs* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

// The symbol NCCL looks up in the library NCCL_PROFILER_PLUGIN names.
inline constexpr const char* kSymbolV5 = "ncclProfiler_v5";

}  // namespace hangwatch::nccl_profiler
