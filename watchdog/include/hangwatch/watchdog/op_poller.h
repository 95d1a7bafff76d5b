#pragma once
// The poller's per-pass work: take issued operations into the per-stream queues,
// query the oldest of each stream with cudaEventQuery (never a blocking call),
// turn finished ones into CompletedOp records and give their events back to the
// pool of the device they were recorded on.
#include <cstdint>
#include <functional>

#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/watchdog/event_api.h"
#include "hangwatch/watchdog/device_timers.h"
#include "hangwatch/watchdog/stream_queues.h"

namespace hangwatch::watchdog {

class OpPoller {
 public:
  using CompletionSink = std::function<void(const CompletedOp&)>;
  using KernelNamer = std::function<const char*(const PendingOp& op)>;  // a generic kernel's name

  OpPoller(EventApi& api, DeviceTimers& timers, CommTable& comms, CompletionSink sink,
           KernelNamer namer = nullptr);

  void accept(const PendingOp& op) { queues_.push(op); }
  // Returns how many operations completed in this pass.
  size_t poll(int64_t now_ns);

  const StreamQueues& queues() const { return queues_; }
  uint64_t completed() const { return completed_; }

 private:
  void complete(PendingOp& op, int64_t now_ns);

  EventApi& api_;
  DeviceTimers& timers_;
  CommTable& comms_;
  CompletionSink sink_;
  KernelNamer namer_;
  StreamQueues queues_;
  uint64_t completed_ = 0;
};

}  // namespace hangwatch::watchdog
