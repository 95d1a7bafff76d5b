#include "hangwatch/simgpu/nccl/api_profile.h"

#include <nccl.h>

namespace simnccl::api_profile {
namespace {

namespace np = hangwatch::nccl_profiler;

// ncclProfilerApiState_t and its groupApiState.
enum class GroupApiState { Reset, Started, Stopped };

struct ApiState {
  int profiler_group_depth = 0;
  int mask = 0;
  GroupApiState state = GroupApiState::Reset;
  void* group_api = nullptr;
  void* p2p_api = nullptr;
  void* coll_api = nullptr;  // never cleared, as in NCCL: a later call without one keeps it
};

thread_local ApiState t_api;

// ncclProfilerStartGroupApiEvent + RecordGroupApiEventState(GroupStartApiStop).
void startGroupApi(ProfilerHooks& hooks, int group_depth, bool captured) {
  t_api.mask = ProfilerHooks::mask();
  if ((t_api.mask & np::emittingMask(np::kGroupApi)) != 0 && t_api.profiler_group_depth == 0) {
    np::EventDescr d{};
    d.type = np::kGroupApi;
    d.groupApi.graphCaptured = captured;
    d.groupApi.groupDepth = group_depth;
    hooks.start(d, &t_api.group_api);
    t_api.profiler_group_depth = group_depth;
    t_api.state = GroupApiState::Started;
  }
  if (t_api.state == GroupApiState::Started) {
    t_api.state = GroupApiState::Stopped;
    ProfilerHooks::record(t_api.group_api, np::kGroupStartApiStop, nullptr);
  }
}

// ncclProfilerStart{Coll,P2p}ApiEvent; the caller stops it before returning.
void* startOpApi(ProfilerHooks& hooks, const Op& op, bool captured) {
  np::EventDescr d{};
  d.parentObj = t_api.group_api;
  if (isCollective(op.kind)) {
    d.type = np::kCollApi;
    // AllGather and Broadcast count bytes from here on in NCCL; the API event still has the call's.
    d.collApi = {opName(op.kind), op.count, datatypeName(op.dtype), op.root, op.stream, captured};
    if ((t_api.mask & np::emittingMask(np::kCollApi)) != 0) hooks.start(d, &t_api.coll_api);
    return t_api.coll_api;
  }
  d.type = np::kP2pApi;
  d.p2pApi = {opName(op.kind), op.count, datatypeName(op.dtype), op.stream, captured};
  if ((t_api.mask & np::emittingMask(np::kP2pApi)) != 0) hooks.start(d, &t_api.p2p_api);
  return t_api.p2p_api;
}

}  // namespace

// src/collectives.cc, ncclDatatypeToString (whose table has no ncclUint8).
const char* datatypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return "ncclInt8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    case ncclFloat8e4m3: return "ncclFloat8e4m3";
    case ncclFloat8e5m2: return "ncclFloat8e5m2";
    default: return "Unknown";
  }
}

void enqueueCheck() {
  if (t_api.profiler_group_depth > 0) ++t_api.profiler_group_depth;
}

void taskAppend(ProfilerHooks* hooks, Op& op, int group_depth, bool graph_captured) {
  if (hooks == nullptr) return;  // no plugin: NCCL's profiler calls do nothing
  startGroupApi(*hooks, group_depth, graph_captured);
  op.api_event = startOpApi(*hooks, op, graph_captured);
  op.profiler_mask = t_api.mask;
  op.group_api_event = t_api.group_api;
  if (isCollective(op.kind)) {
    ProfilerHooks::stop(t_api.coll_api);  // ncclProfilerStopCollApiEvent keeps the handle
  } else {
    ProfilerHooks::stop(t_api.p2p_api);
    t_api.p2p_api = nullptr;
  }
}

void groupEndEntered() {
  if (t_api.profiler_group_depth > 0) --t_api.profiler_group_depth;
  if (t_api.profiler_group_depth == 0 && t_api.state == GroupApiState::Stopped) {
    t_api.state = GroupApiState::Reset;
    ProfilerHooks::record(t_api.group_api, np::kGroupEndApiStart, nullptr);
  }
}

void groupEndExited() {
  if (t_api.group_api != nullptr && t_api.profiler_group_depth == 0) {
    ProfilerHooks::stop(t_api.group_api);
    t_api.group_api = nullptr;
  }
}

}  // namespace simnccl::api_profile
