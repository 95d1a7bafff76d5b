#pragma once
// A hang the framework declares itself, before HANGWATCH_TIMEOUT would (DESIGN.md §4):
// PyTorch's own watchdog aborts a communicator with a collective pending (ncclCommAbort,
// TORCH_NCCL_ASYNC_ERROR_HANDLING=1 in older versions), or ends the process with SIGABRT
// (what 2.15 does in every mode, 15 s after its timeout). The declaring thread asks the poller
// to dump as a timeout would and is held until this rank's dumps are done, the poller answers
// that nothing is pending (not a hang: an abort at shutdown), or the hold bound passes; then
// the abort goes on as the framework meant it.
//
// A mailbox between the declaring thread, which may be in a signal handler (only atomics,
// clock_gettime and nanosleep there), and the poller thread.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hangwatch::watchdog {

class DeclaredHang {
 public:
  enum class How : int { kNone = 0, kCommAbort = 1, kAbortSignal = 2 };
  enum class Outcome { kDumped, kNothingPending, kHeldTooLong };

  // The declaring thread: async-signal-safe. `comm`: the communicator being aborted (its
  // handle), whose pending operations make it a hang; 0: any pending communication.
  Outcome declareAndHold(How how, uintptr_t comm, int64_t hold_ns) noexcept;

  // The poller: the declaration waiting for an answer (kNone: none).
  How pending() const noexcept { return static_cast<How>(how_.load(std::memory_order_acquire)); }
  uintptr_t pendingComm() const noexcept { return comm_.load(std::memory_order_acquire); }
  // Nothing is pending on this rank's GPUs: the declaration is not a hang.
  void decline() noexcept;
  // This rank began dumping (for a declaration or its own timeout): a declaration waits for
  // the dumps to be done from here on.
  void dumpingBegan() noexcept { dumping_.store(true, std::memory_order_release); }
  // This rank's dumps are done (the responder: the collector finished or was given up on).
  void dumpsDone() noexcept { done_.store(true, std::memory_order_release); }

  // What a declaration's reason is in TRIGGER.json.
  static const char* reason(How how);

  // The line the declaring thread writes to stderr once it lets the abort go on: how long it
  // held it, e.g. "hangwatch[rank 3]: SIGABRT held 2350 ms until this rank's dumps were
  // done\n". Async-signal-safe (no allocation, no locale); `rank` < 0: unknown. Returns the
  // length written into `buf` (at most `cap`, cut short rather than overrun).
  static size_t holdLine(char* buf, size_t cap, int rank, How how, Outcome outcome, int64_t held_ns) noexcept;

  // hangwatch's own threads (the poller, the responder) never hold themselves: an abort
  // there would wait for the thread that is to answer it.
  static void markOwnThread() noexcept;
  static bool onOwnThread() noexcept;

 private:
  std::atomic<int> how_{0};
  std::atomic<uintptr_t> comm_{0};
  std::atomic<uint32_t> declined_{0};  // bumped by each decline
  std::atomic<bool> dumping_{false};
  std::atomic<bool> done_{false};
};

}  // namespace hangwatch::watchdog
