#pragma once
// What the report keeps of one rank's dumps: the parsed JSON is dropped as soon as a rank is
// read, so 16,384 ranks fit in memory. Passive data; JobLoader fills it, the analyses read it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/forensics_dump.h"
#include "hangwatch/rank_state.h"
#include "hangwatch/stack_frame.h"
#include "hangwatch/stack_table.h"
#include "hangwatch/watchdog_snapshot.h"

namespace hangwatch::verdict {

struct RankSummary {
  int rank = -1;  // from the file name, the only rank a corrupt file still tells
  bool has_snapshot = false;
  bool has_forensics = false;
  // Why a file that exists could not be used ("truncated or corrupt JSON: ..."); empty when fine or absent.
  std::string snapshot_problem;
  std::string forensics_problem;

  std::string host;
  int64_t pid = 0;
  std::optional<int> device;
  std::string job_id;
  std::optional<int> world_size;
  double snapshot_time_unix_s = 0;
  double timeout_s = 0;
  bool detected_here = false;
  std::vector<SnapshotComm> comms;
  std::vector<SnapshotPendingOp> pending;  // every stream's pending ops, oldest first per stream
  std::vector<SnapshotHostCall> host_calls;

  // Each thread's stack is an id in JobData::stacks: ranks share a few hundred distinct stacks.
  std::vector<stackmerge::RankThread> threads;
  std::vector<RingProgress> ring_progress;
  std::vector<std::string> collector_errors;
  std::string process_state;
  std::string target_exited_during;  // the collector's target died in this phase

  std::optional<RankState> state;  // ranks/rNNNNN.state.json, when there is one
  bool collecting = false;         // its collector was still at work when the report was made

  bool answered() const { return has_snapshot || has_forensics; }
  // Why this rank's data is short of complete, for the verdict to name; empty when complete
  // (a snapshot, and a forensics dump with ring progress on `comm`).
  std::string lacking(const std::string& comm) const;
};

}  // namespace hangwatch::verdict
