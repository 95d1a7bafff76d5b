#pragma once
// PyTorch's Flight Recorder dumps kept with the job (ranks/rNNNNN.flight_recorder.pkl, the
// collector's copy) as extra evidence for a verdict about a stuck operation: the process group
// the pending collective belongs to by PyTorch's name and description, the Python call site it
// recorded, and ranks whose recorder shows they never enqueued it. Evidence only: the verdict
// is made without them and never changed by them (DESIGN.md §4).
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

void addFlightRecorderEvidence(Verdict& v, const JobData& job);

}  // namespace hangwatch::verdict
