#pragma once
// The last `capacity` completed ops and host synchronizations of this rank, kept for
// `forensics timeline` and for lining collectives up across ranks. Both rings are
// allocated once; recording overwrites the oldest entry and never allocates, so memory
// stays bounded whatever the job length. Names are the static strings the interposers
// store, so an entry is plain data.
//
// Threading: like MetricsWindows, only the poller thread touches it.
#include <cstdint>
#include <string>
#include <vector>

#include "hangwatch/common/timeline_window.h"
#include "hangwatch/watchdog/metrics/op_record.h"

namespace hangwatch::watchdog {

class TimelineRing {
 public:
  TimelineRing(size_t op_capacity, size_t sync_capacity);

  void record(const CompletedOp& op);
  void recordHostSync(const HostSync& sync);

  size_t size() const { return op_count_ < ops_.size() ? op_count_ : ops_.size(); }
  uint64_t overwritten() const { return op_count_ > ops_.size() ? op_count_ - ops_.size() : 0; }

  // Oldest first; the identity and clock fields are left for the caller.
  TimelineWindow snapshot() const;

 private:
  std::vector<CompletedOp> ops_;
  std::vector<HostSync> syncs_;
  uint64_t op_count_ = 0;
  uint64_t sync_count_ = 0;
};

}  // namespace hangwatch::watchdog
