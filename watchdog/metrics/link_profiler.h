#pragma once
// hangwatch as an NCCL profiler plugin (API v5): of everything NCCL can report it asks
// only for network proxy operations and steps, and turns each send step's time on the
// wire (SendWait until the step is done) into per-connection totals in linkMeter().
// A ring with one slow link shows the same collective time on every rank; these
// per-connection times are what names the link.
#include "hangwatch/nccl_profiler_v5.h"

namespace hangwatch::watchdog {

// The callback table libhangwatch.so exports as `ncclProfiler_v5`.
const nccl_profiler::ProfilerV5& linkProfiler();

}  // namespace hangwatch::watchdog
