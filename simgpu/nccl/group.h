#pragma once
// ncclGroupStart/End and the launch of operations as "kernels" on streams. Outside
// a group every operation is its own kernel; inside one, ncclGroupEnd launches one
// kernel per stream holding all of that stream's operations (run concurrently, as
// NCCL fuses them), and completes communicator inits started in the group.
#include <functional>
#include <vector>

#include "op.h"

namespace simnccl {

ncclResult_t groupStart();
ncclResult_t groupEnd();
bool inGroup();

// Launches now, or at the end of the current group.
ncclResult_t submit(Op op);
// Runs `init` at group end (concurrently with the group's other inits).
void deferInit(std::function<ncclResult_t()> init);

void setLastError(const std::string& message);
const char* lastError();

}  // namespace simnccl
