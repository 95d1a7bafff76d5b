#pragma once
// Per-connection network transfer totals, fed by NCCL's profiler plugin callbacks
// (watchdog/nccl_profiler_plugin.cc) and drained into each metrics window.
//
// Threading: add() runs on NCCL's proxy threads (simnccl: its channel threads), drain()
// on the watchdog's poller; a mutex guards the table (one uncontended lock per step).
// Memory is bounded: at most kMaxLinks connections, the rest are counted as dropped.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "hangwatch/common/metrics_window.h"

namespace hangwatch::watchdog {

struct LinkKey {
  uint64_t comm_id = 0;  // NCCL's communicator id: the same on every member
  int comm_size = 0;
  int comm_rank = 0;
  int peer = 0;          // the receiver, in the communicator
  bool operator<(const LinkKey& o) const {
    return std::tie(comm_id, comm_rank, peer, comm_size) < std::tie(o.comm_id, o.comm_rank, o.peer, o.comm_size);
  }
};

class LinkMeter {
 public:
  static constexpr size_t kMaxLinks = 64;

  // One step of `bytes` handed to the network at start_ns and done at end_ns
  // (CLOCK_MONOTONIC). Steps of several channels share the link: busy time is the
  // union of their intervals, accumulated in completion order.
  void add(const LinkKey& key, uint64_t bytes, int64_t start_ns, int64_t end_ns);

  // The totals since the last drain, one entry per connection that moved data; resets them.
  std::vector<LinkWindowStats> drain();
  uint64_t dropped() const;

 private:
  struct Totals {
    uint64_t bytes = 0;
    uint64_t steps = 0;
    int64_t busy_ns = 0;
    int64_t busy_until_ns = 0;
  };

  mutable std::mutex mutex_;
  std::map<LinkKey, Totals> links_;
  uint64_t dropped_ = 0;
};

// The process's meter, shared by the plugin and the metrics windows.
LinkMeter& linkMeter();

}  // namespace hangwatch::watchdog
