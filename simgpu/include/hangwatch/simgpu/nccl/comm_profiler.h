#pragma once
// What one rank of a communicator reports to a profiler plugin, decided at launch as NCCL
// 2.28 decides it (src/enqueue.cc, src/plugin/profiler.cc, src/proxy.cc), from the mask
// each call saw (api_profile.h): per kernel a KernelLaunch and a Group event, per
// operation a TaskProfile with its Coll/P2p event, one NetProxyOp per connection between nodes the
// operation moves steps on (SaveProxy: P2P/SHM connections have no proxy progress), and
// KernelCh events when the plugin asks for them. It keeps NCCL's per-function collective
// sequence numbers, where each NET receive connection's next operation starts (NCCL's
// proxy reserves an operation's steps when it takes it up), and the proxy thread that
// watches receives.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "hangwatch/simgpu/nccl/net_proxy_thread.h"
#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/op.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"
#include "hangwatch/simgpu/nccl/task_profile.h"

namespace simnccl {

// The steps one rank moves on one connection for one operation.
struct PeerSteps {
  int peer;
  bool send;
  int steps;
  Connection* conn;
};

// The steps one rank moves on one channel for one operation, per connection in the order
// the operation first uses them (a ring: its next and its prev; a tree: parent and children).
struct ChannelSteps {
  bool has_work = false;  // the channel has a share of the data (NCCL would schedule it)
  std::vector<PeerSteps> ends;

  void count(int peer, bool send, Connection* conn);
  int steps(int peer, bool send) const;
};

class CommProfiler {
 public:
  CommProfiler(std::unique_ptr<ProfilerHooks> hooks, SharedSegment& segment, const NodeTopology& nodes, int rank,
               const std::atomic<bool>& aborted);
  ~CommProfiler();
  CommProfiler(const CommProfiler&) = delete;
  CommProfiler& operator=(const CommProfiler&) = delete;

  ProfilerHooks* hooks() const { return hooks_.get(); }

  // Per kernel, from the first of this communicator's operations in `ops` whose call saw a
  // mask: NCCL's KernelLaunch event (ncclProfilerStartKernelLaunchEvent, under the GroupApi
  // event; the caller stops it) and its legacy Group event (ncclProfilerStartGroupEvent, the
  // Coll/P2p events' parentGroup). Null when the mask does not ask for them.
  void* startKernelLaunch(const std::vector<Op>& ops);
  void* startGroup(const std::vector<Op>& ops);

  // On the launching thread, before the kernel is queued. Null when the call's mask asks
  // for nothing this operation would report. `persistent`: a replay of a captured graph.
  std::shared_ptr<TaskProfile> launch(const Op& op, bool persistent, void* group_event,
                                      const std::function<ChannelSteps(int channel)>& steps_on_channel);
  // Before the communicator's threads go away: no receive is watched after this.
  void stop();

 private:
  void startTask(TaskProfile& profile, const Op& op, int channels_with_work, void* group_event, Algo algo);
  void watchReceive(std::shared_ptr<NetProxyOp> op);

  std::unique_ptr<ProfilerHooks> hooks_;
  SharedSegment& segment_;
  const NodeTopology& nodes_;
  const int rank_;
  const int nranks_;
  const int nchannels_;
  const std::atomic<bool>& aborted_;
  std::mutex mutex_;  // launches from several threads (non-blocking communicators)
  std::array<uint64_t, 8> seq_of_func_{};  // NCCL's comm->seqNumber[func], by OpKind
  // Per connection this rank receives on: the step the next operation's receives start at.
  std::map<const Connection*, uint64_t> recv_next_;
  std::unique_ptr<NetProxyThread> proxy_;  // started with the first receive between nodes
  bool stopped_ = false;
};

}  // namespace simnccl
