// NCCL 2.28's adaptor for a version 4 profiler plugin (src/plugin/profiler/profiler_v4.cc),
// rewritten from what it does: NCCL calls it as a v5 plugin.
#include <atomic>

#include "hangwatch/common/nccl_profiler_plugin.h"

namespace hangwatch::nccl_profiler {
namespace {

std::atomic<const ProfilerV4*> g_v4{nullptr};

const ProfilerV4& v4() { return *g_v4.load(std::memory_order_acquire); }

// The event's own fields; false for the v5-only types, which a v4 plugin never sees.
bool convertFields(const EventDescr& d, EventDescrV4& out) {
  switch (d.type) {
    case kGroup:
    case kProxyCtrl:
      return true;
    case kColl:
      out.coll = {d.coll.seqNumber, d.coll.func,     d.coll.sendBuff, d.coll.recvBuff,
                  d.coll.count,     d.coll.root,     d.coll.datatype, d.coll.nChannels,
                  d.coll.nWarps,    d.coll.algo,     d.coll.proto};
      out.parentObj = d.coll.parentGroup;
      return true;
    case kP2p:
      out.p2p = {d.p2p.func, d.p2p.buff, d.p2p.datatype, d.p2p.count, d.p2p.peer, d.p2p.nChannels};
      out.parentObj = d.p2p.parentGroup;
      return true;
    case kProxyOp:
      out.proxyOp = {d.proxyOp.pid,    d.proxyOp.channelId, d.proxyOp.peer,
                     d.proxyOp.nSteps, d.proxyOp.chunkSize, d.proxyOp.isSend};
      return true;
    case kProxyStep:
      out.proxyStep.step = d.proxyStep.step;
      return true;
    case kKernelCh:
      out.kernelCh = {d.kernelCh.channelId, d.kernelCh.pTimer};
      return true;
    case kNetPlugin:
      out.netPlugin = {d.netPlugin.id, d.netPlugin.data};
      return true;
    default:
      return false;
  }
}

ncclResult_t startEvent(void* context, void** handle, EventDescr* descr) {
  EventDescrV4 d{};
  d.type = static_cast<uint8_t>(descr->type);
  d.parentObj = descr->parentObj;
  d.rank = descr->rank;
  if (!convertFields(*descr, d)) return ncclSuccess;  // *handle untouched, as in NCCL
  return v4().startEvent(context, handle, &d);
}

ncclResult_t recordEventState(void* handle, EventState state, EventStateArgs* args) {
  EventStateArgs a{};
  switch (state) {
    case kProxyOpInProgress:
      break;
    case kProxyStepSendGPUWait:
    case kProxyStepSendPeerWait:
    case kProxyStepSendWait:
    case kProxyStepRecvWait:
    case kProxyStepRecvFlushWait:
    case kProxyStepRecvGPUWait:
      if (args != nullptr) a.proxyStep.transSize = args->proxyStep.transSize;
      break;
    case kNetPluginUpdate:
      if (args != nullptr) a.netPlugin.data = args->netPlugin.data;
      break;
    case kKernelChStop:
      if (args != nullptr) a.kernelCh.pTimer = args->kernelCh.pTimer;
      break;
    case kProxyCtrlIdle:
    case kProxyCtrlActive:
    case kProxyCtrlSleep:
    case kProxyCtrlWakeup:
    case kProxyCtrlAppend:
    case kProxyCtrlAppendEnd:
      if (args != nullptr) a.proxyCtrl.appendedProxyOps = args->proxyCtrl.appendedProxyOps;
      break;
    default:
      return ncclSuccess;  // the group API states
  }
  return v4().recordEventState(handle, state, &a);
}

ncclResult_t init(void** context, uint64_t comm_id, int* mask, const char* name, int nodes, int nranks, int rank,
                  DebugLogger log) {
  return v4().init(context, mask, name, comm_id, nodes, nranks, rank, log);
}

ncclResult_t stopEvent(void* handle) { return v4().stopEvent(handle); }
ncclResult_t finalize(void* context) { return v4().finalize(context); }

ProfilerV5 g_adaptor = {nullptr, &init, &startEvent, &stopEvent, &recordEventState, &finalize};

}  // namespace

const ProfilerV5* adaptV4(const ProfilerV4* plugin) {
  g_v4.store(plugin, std::memory_order_release);
  g_adaptor.name = plugin->name;
  return &g_adaptor;
}

}  // namespace hangwatch::nccl_profiler
