#include "hangwatch/watchdog/metrics/timeline_ring.h"

#include <algorithm>

#include "hangwatch/watchdog/metrics/op_key_table.h"

namespace hangwatch::watchdog {
TimelineRing::TimelineRing(size_t op_capacity, size_t sync_capacity)
    : ops_(std::max<size_t>(op_capacity, 1)), syncs_(std::max<size_t>(sync_capacity, 1)) {}

void TimelineRing::record(const CompletedOp& op) { ops_[op_count_++ % ops_.size()] = op; }

void TimelineRing::recordHostSync(const HostSync& sync) { syncs_[sync_count_++ % syncs_.size()] = sync; }

TimelineWindow TimelineRing::snapshot() const {
  TimelineWindow w;
  w.overwritten = overwritten();
  const uint64_t first_op = op_count_ - size();
  w.ops.reserve(size());
  for (uint64_t i = first_op; i < op_count_; ++i) {
    const CompletedOp& c = ops_[i % ops_.size()];
    TimelineOp o;
    o.cls = opClassName(c.cls);
    o.name = c.name ? c.name : "";
    o.stream = hexId(c.stream);
    if (c.comm_hash != 0) {
      o.comm = hexId(c.comm_hash);
      o.comm_rank = c.comm_rank;
      o.comm_size = c.comm_size;
      o.seq = c.seq;
    }
    o.peer = c.peer;
    o.bytes = c.bytes;
    o.flops = c.flops;
    if (c.cls == OpClass::kGemm) o.shape = gemmShapeText(c.m, c.n, c.k, c.batch);
    o.issue_ns = c.host_issue_ns;
    o.start_ns = c.gpu_start_ns;
    o.end_ns = c.gpu_end_ns;
    w.ops.push_back(std::move(o));
  }
  const uint64_t kept_syncs = std::min<uint64_t>(sync_count_, syncs_.size());
  for (uint64_t i = sync_count_ - kept_syncs; i < sync_count_; ++i) {
    const HostSync& s = syncs_[i % syncs_.size()];
    w.syncs.push_back({s.call ? s.call : "", s.start_ns, s.end_ns});
  }
  return w;
}

}  // namespace hangwatch::watchdog
