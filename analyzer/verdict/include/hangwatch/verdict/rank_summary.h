#pragma once
// What the report keeps of one rank's dumps: the parsed JSON is dropped as soon as a rank is
// read, so 16,384 ranks fit in memory. Passive data; JobLoader fills it, the analyses read it.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/stackmerge/stack_table.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::verdict {

// One end of a network connection of a communicator this rank had a collective pending on,
// from the snapshot's profiler progress (NCCL's ProxyOp/ProxyStep events).
// NCCL's commHash as the snapshot writes it (comms[].nccl_id, 16 hex digits) -> its value;
// 0 for anything else.
uint64_t ncclIdValue(const std::string& hex);

struct ProxyEnd {
  uint64_t nccl_comm = 0;  // NCCL's commHash
  int comm_rank = -1;      // this rank in the communicator
  int comm_size = 0;
  int peer = -1;           // the other end, in the communicator
  int channel = 0;
  bool send = false;
  std::array<uint64_t, kSnapshotProxyStages> steps{};  // send: posted, filled, sent, done; recv: posted,
                                                       // arrived, delivered, done
  float moved_s_ago[kSnapshotProxyStages] = {-1, -1, -1, -1};  // -1: never
  // Proxy operations this end started and finished, and those whose steps went uncounted:
  // two ends' cumulative steps compare only when they saw the same operations.
  uint64_t ops = 0, ops_done = 0, untracked_ops = 0;
};

// A kernel channel of such a communicator.
struct KernelChannelState {
  uint64_t nccl_comm = 0;
  int channel = 0;
  uint64_t started = 0, stopped = 0;
  float started_s_ago = -1;  // -1: never
};

// The collectives NCCL launched with one algorithm on such a communicator (Coll events).
struct CollAlgorithmUse {
  uint64_t nccl_comm = 0;
  std::string algo;        // NCCL's name: RING, TREE, PAT, NVLS, ...
  uint64_t launched = 0;
  float last_s_ago = -1;   // -1: unknown
};

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
  // NCCL's profiler, for the communicators with a pending collective here (the others are
  // not kept: 16,384 ranks must fit). has_progress: the plugin ran in this process.
  bool has_progress = false;
  std::vector<ProxyEnd> proxy_ends;
  std::vector<KernelChannelState> kernel_channels;
  std::vector<CollAlgorithmUse> algorithms;

  // Each thread's stack is an id in JobData::stacks: ranks share a few hundred distinct stacks.
  std::vector<stackmerge::RankThread> threads;
  std::vector<RingProgress> ring_progress;
  std::vector<std::string> collector_errors;
  std::string process_state;
  std::string target_exited_during;  // the collector's target died in this phase

  std::optional<RankState> state;  // ranks/rNNNNN.state.json, when there is one
  std::optional<SuspectState> suspect;  // a suspect snapshot's: which early warning, resumed since
  bool collecting = false;         // its collector was still at work when the report was made

  bool answered() const { return has_snapshot || has_forensics; }
  // Why this rank's data is short of complete, for the verdict to name; empty when complete
  // (a snapshot, and a forensics dump with ring progress on `comm`).
  std::string lacking(const std::string& comm) const;
};

}  // namespace hangwatch::verdict
