#pragma once
// The INFO lines (INIT) NCCL prints around each communicator's init, src/init.cc of v2.28.9-1
// (ncclCommInitRankFunc), on the communicator's device:
//   :1574 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START"
//   :1598 "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE"
// and for a child of ncclCommSplit / ncclCommShrink, which has no commId of its own:
//   :1561 "... busId %lx parent %p splitCount %d color %d key %d- Init START" (sic, no space)
//   :1593 "... busId %lx parent %p splitCount %d color %d key %d - Init COMPLETE"
// %s is the API function (job->funcName), comm the handle the caller gets, commId the hash
// of the unique id, in simnccl the communicatorId a profiler plugin is given.
#include <nccl.h>

#include <cstdint>

namespace simnccl {

// The fields of NCCL's ncclCommInitRankAsyncJob the lines name.
struct CommInitCaller {
  const char* func = "ncclCommInitRank";
  const ncclComm* parent = nullptr;  // set for ncclCommSplit and ncclCommShrink
  int split_count = 0;               // the parent's splits so far, this one included (0 for a shrink)
  int color = 0;
  int key = 0;
};

struct CommInitLine {
  const ncclComm* comm;
  int rank;
  int nranks;
  int device;
  uint64_t comm_id;
};

void logCommInit(const CommInitCaller& caller, const CommInitLine& line, bool complete);

}  // namespace simnccl
