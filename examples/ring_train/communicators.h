#pragma once
// NCCL communicators bootstrapped over MPI: MPI only carries the unique id, every
// byte of training traffic goes through NCCL.
#include <mpi.h>
#include <nccl.h>

// Rank 0 of `group` creates the unique id and broadcasts it; every member then
// joins the NCCL communicator with its rank in `group`.
// One device per process on a node (local rank modulo the device count).
void selectDevice();

// `nonblocking`: made with config.blocking = 0, waited for with ncclCommGetAsyncError.
ncclComm_t joinCommunicator(MPI_Comm group, bool nonblocking = false);

struct TensorParallelGroup {
  ncclComm_t comm = nullptr;
  int rank = 0;          // within the group
  int size = 1;
  int first_global = 0;  // global rank of the group's rank 0
};

// Groups of `tp` consecutive global ranks, each with its own communicator.
TensorParallelGroup joinTensorParallelGroup(int global_rank, int tp, bool nonblocking = false);
