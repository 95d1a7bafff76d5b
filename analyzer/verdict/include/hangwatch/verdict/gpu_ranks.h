#pragma once
// A process may drive several GPUs, one NCCL rank each (ncclCommInitAll, a thread per GPU,
// nccl-tests -g/-t). The report's ranks are then GPU ranks (DESIGN.md §3): each GPU's rank in
// the job's widest communicator, mapped to its process (pid, host, launcher rank) and GPU.
// Everything the report reads per process (snapshot, forensics dump, state) is split here
// into one record per GPU rank, so that every analysis after it speaks of GPUs.
#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

// Splits job.ranks when a process holds several ranks of the widest communicator and every
// answered process holds at least one; fills job.gpu_ranks, job.processes and world_size and
// maps the trigger's, the collecting and the gone processes' ranks. Leaves the job as it is
// (launcher ranks) otherwise.
void splitProcessesIntoGpuRanks(JobData& job);

// One sentence for the report's header: which communicator's ranks the GPU ranks are, and
// which process drives which.
std::string gpuRanksText(const JobData& job);

}  // namespace hangwatch::verdict
