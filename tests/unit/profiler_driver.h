#pragma once
// Drives a profiler plugin's callbacks for one communicator the way NCCL 2.28 does
// (src/plugin/profiler.cc, src/enqueue.cc hostStreamPlanTask, src/transport/net.cc), so a
// plugin can be driven directly ("loaded alone") or through hangwatch's chain and the two
// compared: NCCL's mask is one int per process, sampled at each call; an event is sent
// only when the sampled mask asks for it or for one under it (emittingMask), into the
// handle slot NCCL keeps for it; a step's states are recorded only under an operation
// with a handle; a held-back receive step is started again without a stop.
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "hangwatch/common/nccl_profiler_v5.h"

namespace testing {

namespace np = hangwatch::nccl_profiler;

class NcclLikeComm {
 public:
  // `mask`: NCCL's ncclProfilerEventMask, shared by every communicator of the process.
  NcclLikeComm(const np::ProfilerV5& plugin, int& mask) : plugin_(plugin), mask_(mask) {}

  void init(uint64_t comm_id, int rank) {
    plugin_.init(&context_, comm_id, &mask_, "comm", 4, 4, rank, nullptr);
  }
  void finalize() {
    if (context_ != nullptr) plugin_.finalize(context_);
  }
  void* context() const { return context_; }

  // One ncclAllReduce outside a group: its API events, then (hostStreamPlanTask) the
  // Group and Coll events, `ops` send ProxyOps of `steps` steps each on the proxy
  // thread, and a KernelCh event per op's channel. `pid`: the ProxyOps' (PXN: another).
  void allReduce(int ops, int steps, pid_t pid = ::getpid()) {
    const int mask = __atomic_load_n(&mask_, __ATOMIC_RELAXED);
    void* group_api = nullptr;
    if (wants(mask, np::kGroupApi)) {
      np::EventDescr d{};
      d.type = np::kGroupApi;
      d.groupApi.groupDepth = 1;
      plugin_.startEvent(context_, &group_api, &d);
      record(group_api, np::kGroupStartApiStop);
    }
    if (wants(mask, np::kCollApi)) {
      np::EventDescr d{};
      d.type = np::kCollApi;
      d.parentObj = group_api;
      d.collApi.func = "AllReduce";
      plugin_.startEvent(context_, &coll_api_, &d);  // NCCL never clears this slot
      if (coll_api_ != nullptr) plugin_.stopEvent(coll_api_);
    }
    record(group_api, np::kGroupEndApiStart);
    if (wants(mask, np::kKernelLaunch)) {
      void* launch = nullptr;
      np::EventDescr d{};
      d.type = np::kKernelLaunch;
      d.parentObj = group_api;
      plugin_.startEvent(context_, &launch, &d);
      stop(launch);
    }
    void* group = nullptr;
    void* coll = nullptr;
    if (wants(mask, np::kGroup)) {
      np::EventDescr d{};
      d.type = np::kGroup;
      plugin_.startEvent(context_, &group, &d);
    }
    if (wants(mask, np::kColl)) {
      np::EventDescr d{};
      d.type = np::kColl;
      d.parentObj = coll_api_;
      d.coll.func = "AllReduce";
      d.coll.algo = "RING";  // NCCL always names them (src/enqueue.cc)
      d.coll.proto = "SIMPLE";
      d.coll.parentGroup = group;
      plugin_.startEvent(context_, &coll, &d);
    }
    stop(coll);
    stop(group);
    for (int op = 0; op < ops; ++op) proxyOp(mask, coll, op, steps, pid);
    stop(group_api);
  }

  // A receive whose first step the proxy holds back: started `passes` times, never
  // stopped (recvProxyProgress with a registered buffer before the kernel started);
  // then posted and completed. Returns nothing; the plugin saw every call.
  void heldBackReceive(long passes) {
    const int mask = __atomic_load_n(&mask_, __ATOMIC_RELAXED);
    void* op = nullptr;
    if (wants(mask, np::kProxyOp)) {
      np::EventDescr d{};
      d.type = np::kProxyOp;
      d.proxyOp.pid = ::getpid();
      d.proxyOp.peer = 1;
      d.proxyOp.nSteps = 1;
      d.proxyOp.isSend = 0;
      plugin_.startEvent(context_, &op, &d);
    }
    void* step = nullptr;
    for (long i = 0; i <= passes; ++i) startStep(mask, op, 0, &step);
    if (op != nullptr) {
      record(step, np::kProxyStepRecvWait);
      record(step, np::kProxyStepRecvFlushWait);
      record(step, np::kProxyStepRecvGPUWait);
    }
    stop(step);
    stop(op);
  }

 private:
  static bool wants(int mask, uint64_t type) { return (static_cast<uint64_t>(mask) & np::emittingMask(type)) != 0; }
  void record(void* h, np::EventState s) {
    np::EventStateArgs a{};
    a.proxyStep.transSize = 4096;
    if (h != nullptr) plugin_.recordEventState(h, s, &a);
  }
  void stop(void* h) {
    if (h != nullptr) plugin_.stopEvent(h);
  }
  void startStep(int mask, void* op, int step, void** slot) {
    if (!wants(mask, np::kProxyStep)) return;
    np::EventDescr d{};
    d.type = np::kProxyStep;
    d.parentObj = op;
    d.proxyStep.step = step;
    plugin_.startEvent(context_, slot, &d);
  }

  void proxyOp(int mask, void* coll, int channel, int steps, pid_t pid) {
    void* op = nullptr;
    if (wants(mask, np::kProxyOp)) {
      np::EventDescr d{};
      d.type = np::kProxyOp;
      d.parentObj = coll;
      d.proxyOp.pid = pid;
      d.proxyOp.channelId = static_cast<uint8_t>(channel);
      d.proxyOp.peer = 1;
      d.proxyOp.nSteps = steps;
      d.proxyOp.isSend = 1;
      plugin_.startEvent(context_, &op, &d);
      record(op, np::kProxyOpInProgress);
    }
    void* kernel = nullptr;
    if (wants(mask, np::kKernelCh)) {
      np::EventDescr d{};
      d.type = np::kKernelCh;
      d.parentObj = coll;
      d.kernelCh.channelId = static_cast<uint8_t>(channel);
      plugin_.startEvent(context_, &kernel, &d);
    }
    std::vector<void*> slots(8, nullptr);
    for (int s = 0; s < steps; ++s) {
      void** slot = &slots[static_cast<size_t>(s) % slots.size()];
      startStep(mask, op, s, slot);
      if (op != nullptr) {
        record(*slot, np::kProxyStepSendGPUWait);
        record(*slot, np::kProxyStepSendPeerWait);
        record(*slot, np::kProxyStepSendWait);
      }
      if (*slot != nullptr) {
        plugin_.stopEvent(*slot);
        *slot = nullptr;
      }
    }
    if (kernel != nullptr) {
      record(kernel, np::kKernelChStop);
      plugin_.stopEvent(kernel);
    }
    stop(op);
  }

  const np::ProfilerV5& plugin_;
  int& mask_;
  void* context_ = nullptr;
  void* coll_api_ = nullptr;
};

}  // namespace testing
