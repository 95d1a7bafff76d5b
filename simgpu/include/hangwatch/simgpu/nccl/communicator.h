#pragma once
// One rank's side of a simnccl communicator: its shared segment, its channel
// threads (the sim's "blocks"), the per-connection step counts that NCCL keeps in
// conn.step, which node every member is on, and what it reports to a profiler
// plugin. Handles given to the user (ncclComm_t) point at a ncclComm that holds a
// shared_ptr to this, so work in flight outlives abort.
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/simgpu/nccl/algorithm.h"
#include "hangwatch/simgpu/nccl/comm_profiler.h"
#include "hangwatch/simgpu/nccl/net_connection_log.h"
#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/op.h"
#include "hangwatch/simgpu/nccl/ring_channel.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"
#include "hangwatch/simgpu/faults.h"

namespace simnccl {

// Collectives of one kernel for one communicator, run by every channel thread.
struct ChannelBatch {
  std::vector<Op> ops;
  std::mutex mutex;
  std::condition_variable done;
  int remaining = 0;
  bool aborted = false;
};

class Communicator {
 public:
  // Joins the communicator named by `id`; blocks until all nranks ranks joined.
  // `comm_name`: ncclConfig_t's commName, handed to a profiler plugin (may be null).
  static hangwatch::Expected<std::shared_ptr<Communicator>> join(const ncclUniqueId& id, int nranks, int rank,
                                                                 int device, const char* comm_name = nullptr);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }
  // The stream this communicator's kernels run on (made on first use, on its device,
  // non-blocking), as NCCL runs its kernels on an internal stream of the communicator.
  cudaStream_t kernelStream();
  int nchannels() const { return nchannels_; }
  const NodeTopology& nodes() const { return nodes_; }
  const AlgoTable& algorithms() const { return algos_; }
  const TreeLinks& tree(int channel) const { return trees_[static_cast<size_t>(channel)]; }

  uint64_t nextCollectiveSeq() { return next_seq_++; }
  // A collective that was issued but never runs (ncclGroupSimulateEnd) gives its seq back.
  void returnCollectiveSeq() { --next_seq_; }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  void abort();
  // Finishes queued work and stops the channel threads.
  void shutdown();

  // ncclCommSplit's exchange: every rank posts (color, key); returns the comm ranks
  // sharing this rank's color, ordered by (key, rank). Blocks until all ranks posted.
  hangwatch::Expected<std::vector<int>> exchangeSplit(int color, int key);

  // The dead-rank fault on this rank at collective `seq`.
  bool deviceDeadAt(uint64_t seq) const;

  // On the launching thread, before the operation's kernel is queued: what a profiler
  // plugin is told of it (null without a plugin). `persistent`: a graph replay;
  // `group_event`: the kernel's Group event.
  std::shared_ptr<TaskProfile> profileLaunch(const Op& op, bool persistent, void* group_event);
  // Null without a profiler plugin.
  CommProfiler* profiler() const { return profiler_.get(); }
  ProfilerHooks* profilerHooks() const { return profiler_ ? profiler_->hooks() : nullptr; }

  // Runs on the stream thread: all channels run the batch; returns when they are done.
  bool runCollectives(std::vector<Op> ops);
  // Runs p2p operations with one peer in one direction, in order.
  // `launch_index`: this communicator's point-to-point launch (group) number, from 0
  // (nextP2pLaunch): what a fault's op=K counts on a point-to-point connection of a
  // communicator that has run no collective.
  bool runPeerOps(const std::vector<Op>& ops, uint64_t launch_index);
  uint64_t nextP2pLaunch() { return p2p_launches_++; }
  // On the launching thread: NCCL's INFO lines for the NET connections `op` needs that were
  // not made yet (net_connection_log.h); nothing when NCCL_DEBUG prints none of them.
  void logConnections(const Op& op);

  std::atomic<ncclResult_t> async_error{ncclSuccess};
  // Non-blocking communicators (config.blocking = 0): calls return ncclInProgress and
  // simnccl's own thread carries the operation out, as NCCL's async jobs do; `pending`
  // is ncclInProgress until then, and its result after (ncclCommGetAsyncError).
  std::atomic<bool> nonblocking{false};
  std::atomic<ncclResult_t> pending{ncclSuccess};

 private:
  struct PeerState {
    uint64_t send_step = 0;
    uint64_t recv_step = 0;
    LinkPacer pacer;
    std::optional<uint64_t> credit_heard;
  };
  struct ChannelState {
    uint64_t send_step = 0;  // ring: this rank -> next
    uint64_t recv_step = 0;  // ring: prev -> this rank
    LinkPacer pacer;
    std::vector<char> scratch;
    std::optional<uint64_t> credit_heard;  // lost-credit fault: the receiver's head as last heard
    // Tree: per peer (parent or child), this rank's ends of the connections with it.
    std::map<int, PeerState> tree;
    // PAT: per dimension i, [2i] ReduceScatter's ends (to rank + 2^i, from rank - 2^i) and
    // [2i + 1] AllGather's (to rank - 2^i, from rank + 2^i).
    std::vector<PeerState> pat;
  };
  struct ChannelWorker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::shared_ptr<ChannelBatch>> queue;
    bool stopping = false;
  };

  Communicator(int rank, int nranks, int device, std::unique_ptr<SharedSegment> segment,
               const simgpu::FaultPlan& faults);
  void startChannels();
  void channelMain(int channel);
  bool runOnChannel(const Op& op, int channel);
  int faultRank(int comm_rank) const;
  double linkGbps(int from, int to) const;
  bool linkDeadAt(int from, int to, uint64_t seq, int channel) const;
  // The sending end's fault state from op `seq` on: a lost-credit fault freezes the credit
  // it has heard of at the receiver's head when the fault begins (`credit_heard`).
  void applySendFaults(SendEnd& end, uint64_t seq, std::optional<uint64_t>& credit_heard) const;
  // The dead-nic fault that stops the connection between this rank and `peer` at op `seq`
  // (at either end's NIC), or null; connections inside a node use no NIC.
  const simgpu::DeadNicFault* deadNicWith(int peer, uint64_t seq) const;
  void noteNics() const;  // tells the fault ledger which NICs this rank and its members use
  // This rank's ends on a connection with `peer`: their NIC when it crosses nodes, and a
  // receiving end on a connection a dead NIC stops tells the ledger (its sender is elsewhere).
  void placeOnNic(SendEnd& end) const;
  void placeOnNic(RecvEnd& end, uint64_t seq) const;
  // This rank's NIC on the connections with `peer` (an index into simnccl_net_devs), -1 for a
  // peer on this rank's node: what placeOnNic gives each end and the INFO lines name.
  int netDevWith(int peer) const;
  ConnectionLogView connectionLogView() const;
  ChannelSteps stepsOn(const Op& op, int channel);

  int rank_;
  int nranks_;
  int device_;
  std::once_flag kernel_stream_once_;
  cudaStream_t kernel_stream_ = nullptr;
  int nchannels_;
  std::unique_ptr<SharedSegment> segment_;
  const simgpu::FaultPlan& faults_;
  std::vector<int> launcher_ranks_;  // empty: faults name communicator ranks
  std::atomic<uint64_t> next_seq_{0};
  std::atomic<uint64_t> p2p_launches_{0};
  uint64_t split_generation_ = 0;
  std::atomic<bool> aborted_{false};
  std::vector<ChannelState> channels_;
  std::vector<PeerState> peers_;
  std::vector<std::unique_ptr<ChannelWorker>> workers_;
  NodeTopology nodes_;
  NetKind net_ = NetKind::kIB;
  int net_dev_ = -1;  // this rank's NIC (net_devices.h)
  AlgoTable algos_;
  std::vector<TreeLinks> trees_;  // per channel, this rank's
  std::unique_ptr<CommProfiler> profiler_;  // null without a profiler plugin
  std::unique_ptr<NetPeerWatch> peer_watch_;  // null when every member is on this rank's node
  std::unique_ptr<ConnectionLog> connection_log_;

  friend class CollectiveRunner;
};

}  // namespace simnccl
