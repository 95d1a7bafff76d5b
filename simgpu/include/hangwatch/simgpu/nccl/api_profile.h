#pragma once
// The profiler plugin's API events, from NCCL 2.28's per-thread ncclProfilerApiState
// (src/plugin/profiler.cc, src/enqueue.cc, src/group.cc): one GroupApi event per
// outermost group a thread issues operations in (also the implicit group of a single
// call), with its GroupStartApiStop and GroupEndApiStart states, and per operation a
// CollApi or P2pApi event, started and stopped inside the call. Each is sent only when
// the plugin's mask asks for it or for an event under it (emittingMask). The mask the
// call saw and the handles are kept in the Op, as NCCL's task keeps them: the Coll/P2p
// event's parent is the CollApi/P2pApi event (already stopped by then), a KernelLaunch
// event's the GroupApi event.
#include "hangwatch/simgpu/nccl/op.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"

namespace simnccl::api_profile {

// ncclEnqueueCheck, before its implicit ncclGroupStart: a GroupApi event already
// started counts this call's group level too.
void enqueueCheck();
// collTaskAppend / p2pTaskAppend, at group depth `group_depth` (this call's implicit
// group included), with the communicator's hooks (null: no plugin): fills the Op's
// profiler_mask, group_api_event and api_event.
void taskAppend(ProfilerHooks* hooks, Op& op, int group_depth, bool graph_captured);
// ncclGroupEndInternal: on entry, and at its exit (every path).
void groupEndEntered();
void groupEndExited();

// NCCL's name of a datatype (ncclDatatypeToString), as events carry it.
const char* datatypeName(ncclDataType_t t);

}  // namespace simnccl::api_profile
