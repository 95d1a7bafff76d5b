#pragma once
// What NCCL's profiler plugin sees of one operation launched on a communicator: its task
// event (Coll or P2p, started and stopped by the launching thread around the posting of
// the task's proxy operations, as src/enqueue.cc hostStreamPlanTask does), the task's
// network proxy operations per channel (net_proxy_op.h), and per channel with work a
// KernelCh event from when the channel starts the operation until it finished it
// (src/transport/profiler.cc: workStarted / workCompleted). A hung channel's KernelCh is
// started and never stopped.
#include <cstdint>
#include <memory>
#include <vector>

#include "hangwatch/simgpu/nccl/net_proxy_op.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"

namespace simnccl {

class TaskProfile {
 public:
  struct PeerOp {
    int peer;
    bool send;
    std::shared_ptr<NetProxyOp> op;
  };
  struct Channel {
    bool has_work = false;
    std::vector<PeerOp> ops;  // per NET connection with steps, when proxy events are asked for
    void* kernel = nullptr;   // the KernelCh event while the channel runs the operation
  };

  TaskProfile(ProfilerHooks& hooks, bool kernel_events, int nchannels)
      : hooks_(hooks), kernel_events_(kernel_events), channels_(static_cast<size_t>(nchannels)) {}
  TaskProfile(const TaskProfile&) = delete;
  TaskProfile& operator=(const TaskProfile&) = delete;

  // The Coll or P2p event; ProxyOp and KernelCh events name it as their parent.
  void startTask(hangwatch::nccl_profiler::EventDescr& descr) { task_ = hooks_.start(descr); }
  void stopTask() { hooks_.stop(task_); }
  void* task() const { return task_; }

  Channel& channel(int c) { return channels_[static_cast<size_t>(c)]; }
  // The ProxyOp of this operation's send to (recv from) `peer` on channel `c`, or null.
  NetProxyOp* sendOp(int c, int peer) const { return find(c, peer, true); }
  NetProxyOp* recvOp(int c, int peer) const { return find(c, peer, false); }

  // On the channel's thread, as the GPU would write workStarted / workCompleted.
  void kernelStarted(int c);
  void kernelFinished(int c);

 private:
  NetProxyOp* find(int c, int peer, bool send) const {
    for (const PeerOp& p : channels_[static_cast<size_t>(c)].ops)
      if (p.peer == peer && p.send == send) return p.op.get();
    return nullptr;
  }

  ProfilerHooks& hooks_;
  const bool kernel_events_;
  void* task_ = nullptr;
  std::vector<Channel> channels_;
};

}  // namespace simnccl
