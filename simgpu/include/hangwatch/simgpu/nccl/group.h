#pragma once
// ncclGroupStart/End and the launch of operations as "kernels" on streams. Outside
// a group every operation is its own kernel; inside one, ncclGroupEnd launches one
// kernel per stream holding all of that stream's operations (run concurrently, as
// NCCL fuses them), and completes communicator inits started in the group.
#include <functional>
#include <vector>

#include "hangwatch/simgpu/nccl/op.h"

namespace simnccl {

ncclResult_t groupStart();
ncclResult_t groupEnd();
// Ends the group as groupEnd does but runs none of its operations (their collective
// seqs are given back); communicator inits in the group do run, as in NCCL's group.cc.
// `sim` gets a modeled time in microseconds.
ncclResult_t groupSimulateEnd(ncclSimInfo_t* sim);
bool inGroup();
// ncclGroupDepth: the calling thread's group nesting.
int groupDepth();

// Launches now, or at the end of the current group.
ncclResult_t submit(Op op);
// Non-blocking communicators: marks them in progress, launches `ops` on simnccl's own
// thread (NCCL's async job) and returns ncclInProgress.
ncclResult_t launchAsync(std::vector<Op> ops);
// Runs `init` at group end (concurrently with the group's other inits).
void deferInit(std::function<ncclResult_t()> init);

void setLastError(const std::string& message);
const char* lastError();

}  // namespace simnccl
