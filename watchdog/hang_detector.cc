#include "hangwatch/watchdog/hang_detector.h"

#include <unistd.h>

#include <iterator>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/metrics/op_key_table.h"

namespace hangwatch::watchdog {

TriggerRecord triggerRecordFor(const HangFinding& finding, std::optional<int> rank) {
  TriggerRecord record;
  record.rank = rank;
  record.host = hostName();
  record.pid = ::getpid();
  record.time_unix_s = wallClockSeconds();
  record.reason = finding.reason;
  record.stuck_op = finding.stuck;
  return record;
}

std::string describeHang(const HangFinding& finding) {
  std::string text = finding.stuck.op;
  if (finding.device >= 0) fmt::format_to(std::back_inserter(text), " on device {}", finding.device);
  if (!finding.stuck.comm.empty()) {
    fmt::format_to(std::back_inserter(text), " (communicator {}", finding.stuck.comm);
    if (finding.comm_rank >= 0) fmt::format_to(std::back_inserter(text), ", rank {}", finding.comm_rank);
    text += ')';
  }
  fmt::format_to(std::back_inserter(text), " stuck for {:f} s", finding.stuck.age_s);
  return text;
}

namespace {

StuckOp stuckOpOf(uint64_t stream, const PendingOp& op, int64_t age_ns) {
  StuckOp s;
  s.op = op.op.name;
  s.bytes = op.op.bytes;
  s.stream = hexId(stream);
  s.age_s = static_cast<double>(age_ns) * 1e-9;
  const bool graph_with_collective = op.op.cls == OpClass::kGraph && op.op.comm_hash != 0;
  if (op.op.cls == OpClass::kCollective || op.op.cls == OpClass::kP2P || graph_with_collective) {
    s.comm = CommTable::hashHex(op.op.comm_hash);
    if (op.op.cls != OpClass::kP2P) s.seq = op.op.seq;
    if (op.op.peer >= 0) s.peer = op.op.peer;
  }
  return s;
}

bool communicates(const PendingOp& op) {
  return op.op.cls == OpClass::kCollective || op.op.cls == OpClass::kP2P ||
         (op.op.cls == OpClass::kGraph && op.op.comm_hash != 0);
}

}  // namespace

std::optional<HangFinding> StallDetector::check(const StreamQueues& queues, int64_t now_ns) const {
  std::optional<HangFinding> worst;
  int64_t worst_age = -1;
  for (const auto& [stream, q] : queues.streams()) {
    if (q.empty()) continue;
    const PendingOp& op = q.front();
    const int64_t age = now_ns - op.front_since_ns;
    if (age < warn_after_ns_ || age <= worst_age) continue;
    if (!communicates(op) && op.op.cls != OpClass::kGemm) continue;
    // Steps still moving on the wire or kernel channels still cycling: slow, not stalled.
    if (communicates(op) && op.comm != 0 && last_movement_ && now_ns - last_movement_(op.comm) < warn_after_ns_)
      continue;
    worst_age = age;
    worst = HangFinding{"no-progress", stuckOpOf(stream, op, age), op.device, op.op.comm_rank};
  }
  return worst;
}

std::optional<HangFinding> declaredHangFinding(const StreamQueues& queues, int64_t now_ns, const char* reason,
                                               int64_t min_age_ns, uintptr_t comm) {
  std::optional<HangFinding> oldest;
  int64_t oldest_age = -1;
  for (const auto& [stream, q] : queues.streams()) {
    if (q.empty() || !communicates(q.front())) continue;
    const PendingOp& op = q.front();
    if (comm != 0 && op.comm != comm) continue;
    const int64_t age = now_ns - op.front_since_ns;
    if (age < min_age_ns || age <= oldest_age) continue;
    oldest_age = age;
    oldest = HangFinding{reason, stuckOpOf(stream, op, age), op.device, op.op.comm_rank};
  }
  return oldest;
}

std::optional<HangFinding> HangDetector::check(const StreamQueues& queues, const HostCallSlots& host_calls,
                                               CommTable& comms, int64_t now_ns) const {
  std::optional<HangFinding> worst;
  int64_t worst_age = -1;
  for (const auto& [stream, q] : queues.streams()) {
    if (q.empty()) continue;
    const PendingOp& op = q.front();
    int64_t age = now_ns - op.front_since_ns;
    if (age <= timeout_ns_ || age <= worst_age) continue;
    worst_age = age;
    worst = HangFinding{"timeout", stuckOpOf(stream, op, age), op.device, op.op.comm_rank};
  }
  host_calls.forEachBusy([&](const BusyHostCall& call) {
    int64_t age = now_ns - call.enter_ns;
    if (age <= timeout_ns_ || age <= worst_age) return;
    worst_age = age;
    StuckOp s;
    s.op = std::string(call.call) + " (host)";
    if (call.comm) {
      if (CommEntry* e = comms.find(call.comm)) s.comm = CommTable::hashHex(e->hash);
    }
    if (call.seq_plus1) s.seq = call.seq_plus1 - 1;
    s.age_s = static_cast<double>(age) * 1e-9;
    worst = HangFinding{"host-call-timeout", s};
  });
  return worst;
}

}  // namespace hangwatch::watchdog
