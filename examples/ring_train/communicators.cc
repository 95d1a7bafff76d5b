#include "communicators.h"

#include "gpu_check.h"

#include <algorithm>
#include <numeric>

void selectDevice(const Bootstrap& boot) {
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  CUDA_CHECK(cudaSetDevice(boot.localRank() % std::max(devices, 1)));
}

ncclComm_t joinCommunicator(Bootstrap& boot, const std::vector<int>& members, bool nonblocking,
                            const std::function<void()>& before_init) {
  auto me = std::find(members.begin(), members.end(), boot.rank());
  ncclUniqueId id{};
  if (me == members.begin()) NCCL_CHECK(ncclGetUniqueId(&id));
  boot.share(members, &id, sizeof(id));
  if (me == members.end()) return nullptr;
  if (before_init) before_init();
  ncclComm_t comm = nullptr;
  const int size = static_cast<int>(members.size());
  const int rank = static_cast<int>(me - members.begin());
  if (nonblocking) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NCCL_CHECK_ON(comm, ncclCommInitRankConfig(&comm, size, id, rank, &config));
  } else {
    NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
  }
  return comm;
}

ncclComm_t joinWorld(Bootstrap& boot, bool nonblocking, const std::function<void()>& before_init) {
  std::vector<int> all(boot.size());
  std::iota(all.begin(), all.end(), 0);
  return joinCommunicator(boot, all, nonblocking, before_init);
}

TensorParallelGroup joinTensorParallelGroup(Bootstrap& boot, int tp, bool nonblocking) {
  TensorParallelGroup tpg;
  tpg.first_global = boot.rank() - boot.rank() % tp;
  tpg.rank = boot.rank() - tpg.first_global;
  tpg.size = tp;
  // Every group's unique id goes through the bootstrap in the same order on every rank.
  for (int first = 0; first < boot.size(); first += tp) {
    std::vector<int> members(tp);
    std::iota(members.begin(), members.end(), first);
    ncclComm_t comm = joinCommunicator(boot, members, nonblocking);
    if (first == tpg.first_global) tpg.comm = comm;
  }
  return tpg;
}
