#include "comm_identity.h"

#include <nccl.h>

#include "real_api.h"

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

}  // namespace hangwatch::watchdog
