#pragma once
// What the report keeps of one rank's dumps (its snapshot, forensics dump and state, reduced):
// the analyzer's RankSummary is one, and a node summary (node_summary.h) carries one per rank
// of its node, so the report reads a node's ranks from one file and gets the same record.
// Passive data; the field lists below are its one JSON form.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/nccl_info_lines.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/common/schema/field_list.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch {

// One end of a network connection of a communicator this rank had a collective pending on,
// from the snapshot's profiler progress (NCCL's ProxyOp/ProxyStep events).
struct ProxyEnd {
  uint64_t nccl_comm = 0;  // NCCL's commHash
  int comm_rank = -1;      // this rank in the communicator
  int comm_size = 0;
  int peer = -1;           // the other end, in the communicator
  int channel = 0;
  bool send = false;
  std::array<uint64_t, kSnapshotProxyStages> steps{};  // send: posted, filled, sent, done; recv: posted,
                                                       // arrived, delivered, done
  std::array<float, kSnapshotProxyStages> moved_s_ago = {-1, -1, -1, -1};  // -1: never
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

// One thread of one rank: its stack is an id into a table of distinct stacks (the job's
// StackTable in the report, the node's stack classes in a node summary).
struct RankThread {
  int64_t tid = 0;
  std::string name;
  uint32_t stack = 0;
};

struct RankRecord {
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
  std::vector<std::string> unique_ids_made;  // by ncclGetUniqueId in this process
  // NCCL's profiler, for the communicators with a pending collective here (the others are
  // not kept: 131,072 ranks must fit). has_progress: the plugin ran in this process.
  bool has_progress = false;
  std::vector<ProxyEnd> proxy_ends;
  std::vector<KernelChannelState> kernel_channels;
  std::vector<CollAlgorithmUse> algorithms;
  // NCCL's INFO lines on this process's network connections and NICs (nccl_info_lines.h);
  // none when the snapshot carried none (an older dump, HANGWATCH_NCCL_INFO=0).
  std::optional<NcclNetInfo> nccl_net;

  std::vector<RankThread> threads;
  std::vector<RingProgress> ring_progress;
  std::vector<std::string> collector_errors;
  std::string process_state;
  std::string target_exited_during;  // the collector's target died in this phase
  std::optional<RasStatus> ras;      // NCCL's RAS as this rank's collector asked it

  std::optional<RankState> state;  // ranks/rNNNNN.state.json, when there is one
  std::optional<SuspectState> suspect;  // a suspect snapshot's: which early warning, resumed since
};

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<ProxyEnd> {
  static constexpr const char* what = "proxy end";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &ProxyEnd::nccl_comm, "proxy end nccl_comm"),
      field("comm_rank", &ProxyEnd::comm_rank, "proxy end comm_rank"),
      field("comm_size", &ProxyEnd::comm_size, "proxy end comm_size"),
      field("peer", &ProxyEnd::peer, "proxy end peer"),
      field("channel", &ProxyEnd::channel, "proxy end channel"),
      field("send", &ProxyEnd::send, "proxy end send"),
      field("steps", &ProxyEnd::steps, "proxy end steps"),
      field("moved_s_ago", &ProxyEnd::moved_s_ago, "proxy end moved_s_ago"),
      field("ops", &ProxyEnd::ops, "proxy end ops"),
      field("ops_done", &ProxyEnd::ops_done, "proxy end ops_done"),
      field("untracked_ops", &ProxyEnd::untracked_ops, "proxy end untracked_ops"),
  };
};

template <>
struct Schema<KernelChannelState> {
  static constexpr const char* what = "kernel channel state";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &KernelChannelState::nccl_comm, "kernel channel nccl_comm"),
      field("channel", &KernelChannelState::channel, "kernel channel"),
      field("started", &KernelChannelState::started, "kernel channel started"),
      field("stopped", &KernelChannelState::stopped, "kernel channel stopped"),
      field("started_s_ago", &KernelChannelState::started_s_ago, "kernel channel started_s_ago"),
  };
};

template <>
struct Schema<CollAlgorithmUse> {
  static constexpr const char* what = "algorithm use";
  static constexpr auto fields = std::tuple{
      field("nccl_comm", &CollAlgorithmUse::nccl_comm, "algorithm nccl_comm"),
      field("algo", &CollAlgorithmUse::algo, "algo"),
      field("launched", &CollAlgorithmUse::launched, "algorithm launched"),
      field("last_s_ago", &CollAlgorithmUse::last_s_ago, "algorithm last_s_ago"),
  };
};

template <>
struct Schema<RankThread> {
  static constexpr const char* what = "thread";
  static constexpr auto fields = std::tuple{
      field("tid", &RankThread::tid, "thread tid"),
      field("name", &RankThread::name, "thread name"),
      field("stack", &RankThread::stack, "thread stack"),
  };
};

// Empty values are left out: a node summary holds eight such records, read at 16,384 nodes.
template <>
struct Schema<RankRecord> {
  static constexpr const char* what = "rank record";
  static constexpr auto fields = std::tuple{
      field("rank", &RankRecord::rank, "rank"),
      field("has_snapshot", &RankRecord::has_snapshot, "has_snapshot"),
      field("has_forensics", &RankRecord::has_forensics, "has_forensics"),
      field("snapshot_problem", &RankRecord::snapshot_problem, "snapshot_problem", Empty::kOmit),
      field("forensics_problem", &RankRecord::forensics_problem, "forensics_problem", Empty::kOmit),
      field("host", &RankRecord::host, "host", Empty::kOmit),
      field("pid", &RankRecord::pid, "pid", Empty::kOmit),
      field("device", &RankRecord::device, "device", Empty::kOmit),
      field("job_id", &RankRecord::job_id, "job_id", Empty::kOmit),
      field("world_size", &RankRecord::world_size, "world_size", Empty::kOmit),
      field("snapshot_time_unix_s", &RankRecord::snapshot_time_unix_s, "snapshot_time_unix_s", Empty::kOmit),
      field("timeout_s", &RankRecord::timeout_s, "timeout_s", Empty::kOmit),
      field("detected_here", &RankRecord::detected_here, "detected_here"),
      field("comms", &RankRecord::comms, "comms", Empty::kOmit),
      field("pending", &RankRecord::pending, "pending", Empty::kOmit),
      field("host_calls", &RankRecord::host_calls, "host_calls", Empty::kOmit),
      field("unique_ids_made", &RankRecord::unique_ids_made, "unique_ids_made", Empty::kOmit),
      field("has_progress", &RankRecord::has_progress, "has_progress"),
      field("proxy_ends", &RankRecord::proxy_ends, "proxy_ends", Empty::kOmit),
      field("kernel_channels", &RankRecord::kernel_channels, "kernel_channels", Empty::kOmit),
      field("algorithms", &RankRecord::algorithms, "algorithms", Empty::kOmit),
      field("nccl_net", &RankRecord::nccl_net, "nccl_net", Empty::kOmit),
      field("threads", &RankRecord::threads, "threads", Empty::kOmit),
      field("ring_progress", &RankRecord::ring_progress, "ring_progress", Empty::kOmit),
      field("collector_errors", &RankRecord::collector_errors, "collector_errors", Empty::kOmit),
      field("process_state", &RankRecord::process_state, "process_state", Empty::kOmit),
      field("target_exited_during", &RankRecord::target_exited_during, "target_exited_during", Empty::kOmit),
      field("ras", &RankRecord::ras, "ras", Empty::kOmit),
      field("state", &RankRecord::state, "state", Empty::kOmit),
      field("suspect", &RankRecord::suspect, "suspect", Empty::kOmit),
  };
};

}  // namespace hangwatch::schema
