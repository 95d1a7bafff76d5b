#pragma once
// Turns the poller's live state into the ranks/rNNNNN.watchdog.json record.
#include <cstdint>
#include <functional>
#include <optional>

#include "hangwatch/watchdog/comm_table.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/watchdog/host_call_slots.h"
#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"
#include "hangwatch/watchdog/metrics/proxy_progress.h"
#include "hangwatch/watchdog/stream_queues.h"

namespace hangwatch::watchdog {

struct SnapshotInputs {
  const StreamQueues* queues = nullptr;
  CommTable* comms = nullptr;
  const HostCallSlots* host_calls = nullptr;
  RankIdentity launcher;
  std::string job_id;
  std::optional<int> device;
  std::optional<TriggerRecord> trigger;
  bool detected_here = false;
  double timeout_s = 0;
  WatchdogHealth health;
  int64_t now_ns = 0;
  std::function<const char*(const PendingOp&)> kernel_namer;
  // NCCL's profiler events (both may be null: no progress section).
  const ProxyProgress* progress = nullptr;
  NcclCommIds* nccl_ids = nullptr;
  // NCCL's INFO lines naming each connection's NIC (nccl_info_log.h); none: nothing to say.
  std::optional<SnapshotNcclLog> nccl_log;
};

WatchdogSnapshot buildSnapshot(const SnapshotInputs& in);

// The launcher's rank, else the rank in the first communicator this process joined.
std::optional<int> snapshotRank(const RankIdentity& launcher, CommTable& comms);


}  // namespace hangwatch::watchdog
