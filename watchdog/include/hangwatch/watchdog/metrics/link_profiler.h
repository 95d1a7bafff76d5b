#pragma once
// hangwatch as an NCCL profiler plugin (API v5): of everything NCCL can report it asks
// for network proxy operations and steps and for kernel channels. Each step's stages
// and each kernel channel's starts and stops go to proxyProgress() (where the ring
// stopped, for the snapshot: proxy_progress.h); each send step's time on the wire
// (SendWait until the step is done) goes to per-connection totals in linkMeter(): a ring
// with one slow link shows the same collective time on every rank, and these
// per-connection times are what names the link. init also hands NCCL's communicator id
// to nccl_comm_ids.h. Nothing on NCCL's proxy thread locks or allocates beyond the
// link meter's one uncontended lock per completed send step.
#include "hangwatch/common/nccl_profiler_v5.h"

namespace hangwatch::watchdog {

// The callback table libhangwatch.so exports as `ncclProfiler_v5`.
const nccl_profiler::ProfilerV5& linkProfiler();

}  // namespace hangwatch::watchdog
