#include "communicators.h"

#include "gpu_check.h"

#include <algorithm>

void selectDevice() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaSetDevice(local_rank % std::max(devices, 1)));
}

ncclComm_t joinCommunicator(MPI_Comm group, bool nonblocking) {
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  ncclUniqueId id{};
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
  ncclComm_t comm = nullptr;
  if (nonblocking) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NCCL_CHECK_ON(comm, ncclCommInitRankConfig(&comm, size, id, rank, &config));
  } else {
    NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  }
  return comm;
}

TensorParallelGroup joinTensorParallelGroup(int global_rank, int tp, bool nonblocking) {
  MPI_Comm group;
  MPI_Comm_split(MPI_COMM_WORLD, global_rank / tp, global_rank, &group);
  TensorParallelGroup tpg;
  MPI_Comm_rank(group, &tpg.rank);
  MPI_Comm_size(group, &tpg.size);
  tpg.first_global = global_rank - tpg.rank;
  tpg.comm = joinCommunicator(group, nonblocking);
  MPI_Comm_free(&group);
  return tpg;
}
