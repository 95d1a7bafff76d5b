#include "communicators.h"

#include "gpu_check.h"

#include <algorithm>
#include <numeric>

void selectDevice(const Bootstrap& boot) {
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaSetDevice(boot.localRank() % std::max(devices, 1)));
}

ncclComm_t joinCommunicator(Bootstrap& boot, const std::vector<int>& members) {
  auto me = std::find(members.begin(), members.end(), boot.rank());
  ncclUniqueId id{};
  if (me == members.begin()) NCCL_CHECK(ncclGetUniqueId(&id));
  boot.share(members, &id, sizeof(id));
  if (me == members.end()) return nullptr;
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, static_cast<int>(members.size()), id, static_cast<int>(me - members.begin())));
  return comm;
}

ncclComm_t joinWorld(Bootstrap& boot) {
  std::vector<int> all(boot.size());
  std::iota(all.begin(), all.end(), 0);
  return joinCommunicator(boot, all);
}

TensorParallelGroup joinTensorParallelGroup(Bootstrap& boot, int tp) {
  TensorParallelGroup tpg;
  tpg.first_global = boot.rank() - boot.rank() % tp;
  tpg.rank = boot.rank() - tpg.first_global;
  tpg.size = tp;
  // Every group's unique id goes through the bootstrap in the same order on every rank.
  for (int first = 0; first < boot.size(); first += tp) {
    std::vector<int> members(tp);
    std::iota(members.begin(), members.end(), first);
    ncclComm_t comm = joinCommunicator(boot, members);
    if (first == tpg.first_global) tpg.comm = comm;
  }
  return tpg;
}
