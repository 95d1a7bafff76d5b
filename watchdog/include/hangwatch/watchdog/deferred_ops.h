#pragma once
// Operations of non-blocking NCCL communicators (config.blocking = 0): the call returns
// ncclInProgress and NCCL's own thread launches the kernel later, so the end event
// cannot be recorded when the call returns. The operation waits here, its start event
// recorded, until the program sees the communicator ready (ncclCommGetAsyncError says
// ncclSuccess, the program's next call on it finds it ready): then the kernel has been
// launched and the end event goes behind it. Bounded: a full table leaves operations
// untimed (counted), never blocks.
#include <cstdint>
#include <functional>
#include <mutex>

#include "hangwatch/watchdog/pending_op.h"

namespace hangwatch::watchdog {

struct DeferredOp {
  uintptr_t comm = 0;
  PendingOp op;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  void* timer = nullptr;  // the Watchdog::Timing's DeviceTimer*
  uint64_t stream_id = 0;
  int switch_to = -1;
};

class DeferredOps {
 public:
  static constexpr int kSlots = 64;

  bool add(const DeferredOp& op);
  bool has(uintptr_t comm);
  // Removes every operation of `comm` and hands each to `fn`, oldest first.
  void take(uintptr_t comm, const std::function<void(const DeferredOp&)>& fn);
  uint64_t dropped() const { return dropped_; }

 private:
  std::mutex mutex_;
  DeferredOp slots_[kSlots];
  bool used_[kSlots] = {};
  uint64_t order_[kSlots] = {};
  uint64_t next_order_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace hangwatch::watchdog
