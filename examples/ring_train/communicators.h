#pragma once
// NCCL communicators bootstrapped over MPI or env:// (bootstrap.h): the bootstrap only
// carries the unique ids, every byte of training traffic goes through NCCL.
#include <nccl.h>

#include <functional>
#include <vector>

#include "bootstrap.h"

// One device per process on a node (local rank modulo the device count).
void selectDevice(const Bootstrap& boot);

// Called by every rank in the same order: members[0] creates the unique id and shares it;
// every member joins the NCCL communicator with its index in `members` (others get nullptr).
// `nonblocking`: made with config.blocking = 0, waited for with ncclCommGetAsyncError.
// `before_init` runs on every member between receiving the unique id and the init call.
ncclComm_t joinCommunicator(Bootstrap& boot, const std::vector<int>& members, bool nonblocking = false,
                            const std::function<void()>& before_init = {});
ncclComm_t joinWorld(Bootstrap& boot, bool nonblocking = false, const std::function<void()>& before_init = {});

struct TensorParallelGroup {
  ncclComm_t comm = nullptr;
  int rank = 0;          // within the group
  int size = 1;
  int first_global = 0;  // global rank of the group's rank 0
};

// Groups of `tp` consecutive global ranks, each with its own communicator.
TensorParallelGroup joinTensorParallelGroup(Bootstrap& boot, int tp, bool nonblocking = false);
