#pragma once
// The poller's per-stream queues of pending timed operations, oldest first. Work
// on one stream completes in order, so only the front of each queue needs querying.
#include <cstdint>
#include <deque>
#include <map>

#include "hangwatch/watchdog/pending_op.h"

namespace hangwatch::watchdog {

class StreamQueues {
 public:
  void push(const PendingOp& op);
  // The oldest pending op of `stream`, nullptr when none.
  PendingOp* front(uint64_t stream);
  // Removes the front op of `stream`; the next one becomes the front at `now_ns`
  // (or at its own issue time if it was issued later).
  void popFront(uint64_t stream, int64_t now_ns);

  size_t pendingCount() const;
  const std::map<uint64_t, std::deque<PendingOp>>& streams() const { return streams_; }

 private:
  std::map<uint64_t, std::deque<PendingOp>> streams_;
};

}  // namespace hangwatch::watchdog
