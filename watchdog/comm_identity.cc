#include "hangwatch/watchdog/comm_identity.h"

#include <nccl.h>

#include <map>
#include <string>
#include <utility>

#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"
#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

bool completeCommIdentity(CommEntry& entry) {
  auto& api = RealApi::instance();
  auto comm = reinterpret_cast<ncclComm_t>(entry.handle.load(std::memory_order_relaxed));
  ncclResult_t state = ncclInProgress;
  auto async_error = api.commGetAsyncError.get();
  if (async_error == nullptr || async_error(comm, &state) != ncclSuccess || state == ncclInProgress) return false;
  if (state != ncclSuccess) return true;  // failed to initialize: nothing more to learn
  int value = -1;
  if (entry.rank.load(std::memory_order_relaxed) < 0)
    if (auto f = api.commUserRank.get(); f && f(comm, &value) == ncclSuccess) entry.rank.store(value);
  if (entry.size.load(std::memory_order_relaxed) <= 0)
    if (auto f = api.commCount.get(); f && f(comm, &value) == ncclSuccess) entry.size.store(value);
  if (entry.device.load(std::memory_order_relaxed) < 0)
    if (auto f = api.commCuDevice.get(); f && f(comm, &value) == ncclSuccess) entry.device.store(value);
  return true;
}

void tieNcclIds(CommTable& comms, NcclCommIds& ids) {
  if (ids.pendingNotes() == 0) return;
  std::map<std::pair<int, int>, std::vector<CommEntry*>> lacking;
  comms.forEach([&](CommEntry& e) {
    const int rank = e.rank.load(std::memory_order_relaxed), size = e.size.load(std::memory_order_relaxed);
    if (e.nccl_id.load(std::memory_order_acquire) == 0 && rank >= 0 && size > 0) lacking[{rank, size}].push_back(&e);
  });
  for (auto& [key, entries] : lacking) {
    if (entries.size() != 1) continue;
    if (auto id = ids.takeUnique(key.first, key.second)) entries.front()->nccl_id.store(*id, std::memory_order_release);
  }
}

std::map<uintptr_t, std::string> asyncErrors(CommTable& comms) {
  std::map<uintptr_t, std::string> out;
  auto async_error = RealApi::instance().commGetAsyncError.get();
  if (async_error == nullptr) return out;
  comms.forEachLive([&](CommEntry& e) {
    if (!e.from_nccl.load(std::memory_order_acquire) || e.identity_pending.load(std::memory_order_acquire)) return;
    const uintptr_t handle = e.handle.load(std::memory_order_relaxed);
    ncclResult_t state = ncclSuccess;
    if (async_error(reinterpret_cast<ncclComm_t>(handle), &state) != ncclSuccess) return;
    if (state != ncclSuccess && state != ncclInProgress) out[handle] = ncclResultName(state);
  });
  return out;
}

std::string ncclResultName(int result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult " + std::to_string(result);
  }
}

}  // namespace hangwatch::watchdog
