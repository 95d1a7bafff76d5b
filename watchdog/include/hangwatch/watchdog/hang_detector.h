#pragma once
// Decides whether this rank is hung: the oldest pending operation of a stream has
// been the oldest for longer than the timeout (an operation that is merely long
// but finishes never gets there), or a thread has been inside an NCCL host call
// for longer than the timeout.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/common/trigger_record.h"
#include "hangwatch/watchdog/host_call_slots.h"
#include "hangwatch/watchdog/stream_queues.h"

namespace hangwatch::watchdog {

struct HangFinding {
  std::string reason;  // "timeout" (a stream) or "host-call-timeout"
  StuckOp stuck;
  int device = -1;     // the stuck stream's device, -1 for a host call
  int comm_rank = -1;  // this process's rank in the stuck op's communicator, -1 when none
};

// A hang the framework declared (declared_hang.h): the oldest operation at the front of a
// stream that communicates (a collective, a p2p, a graph with one) and has been there for at
// least `min_age_ns`; none when no such operation is pending: an abort at shutdown, or a
// process that aborts right after issuing a collective (a failed assertion), is not a hang a
// framework's timeout declared. `comm` (a communicator handle) other than 0: its operations only.
std::optional<HangFinding> declaredHangFinding(const StreamQueues& queues, int64_t now_ns, const char* reason,
                                               int64_t min_age_ns, uintptr_t comm = 0);

class HangDetector {
 public:
  explicit HangDetector(int64_t timeout_ns) : timeout_ns_(timeout_ns) {}

  // The longest-stuck candidate past the timeout, if any.
  std::optional<HangFinding> check(const StreamQueues& queues, const HostCallSlots& host_calls, CommTable& comms,
                                   int64_t now_ns) const;

 private:
  int64_t timeout_ns_;
};

// The early warning (HANGWATCH_WARN_AFTER): a GPU operation that could be hung (a collective,
// p2p, a GEMM, a graph replay with a collective) has been the oldest of its stream for
// `warn_after` with no NCCL step or kernel channel moving on its communicator meanwhile. Host
// calls do not count (communicator set-up may wait long for late ranks), nor copies and other
// kernels (they wait behind the operations that count).
class StallDetector {
 public:
  // When NCCL's profiler last saw a step or kernel channel of the communicator move (a
  // CLOCK_MONOTONIC ns, 0: never); asked only about candidates.
  using LastMovement = std::function<int64_t(uintptr_t comm_handle)>;
  StallDetector(int64_t warn_after_ns, LastMovement last_movement)
      : warn_after_ns_(warn_after_ns), last_movement_(std::move(last_movement)) {}

  std::optional<HangFinding> check(const StreamQueues& queues, int64_t now_ns) const;
  int64_t warnAfterNs() const { return warn_after_ns_; }

 private:
  int64_t warn_after_ns_;
  LastMovement last_movement_;
};

// The TRIGGER.json record of a hang this process found; `rank` as the snapshot names it.
TriggerRecord triggerRecordFor(const HangFinding& finding, std::optional<int> rank);

// "ncclAllReduce on device 0 (communicator 0x…, rank 3) stuck for 301.000000 s", for the log.
std::string describeHang(const HangFinding& finding);

}  // namespace hangwatch::watchdog
