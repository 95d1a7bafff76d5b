#pragma once
// The step-level primitives simnccl's collectives are built from, shaped like
// NCCL's SIMPLE protocol: a sender waits for a free slot (the receiver's head, its credit),
// copies one step into it and posts the tail; a receiver waits for the tail,
// consumes the slot and posts the head. At most kSteps steps are in flight. On a
// connection between nodes (NCCL's NET transport) each step also moves the
// operation's NetProxyOp on, which tells a profiler plugin what NCCL's proxy would.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hangwatch/simgpu/nccl/net_peer_watch.h"
#include "hangwatch/simgpu/nccl/net_proxy_op.h"
#include "hangwatch/simgpu/nccl/op.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"

namespace simnccl {

enum WaitDirection : int { kWaitRecv = 0, kWaitSend = 1 };

struct SendEnd;
struct RecvEnd;

// What a waiting thread is waiting for; copied into volatile locals of
// simnccl_wait_peer so a debugger attached to a hung rank can read them.
struct WaitSite {
  int rank;
  int channel;
  int peer;
  int direction;  // WaitDirection
  uint64_t seq;
  const char* op;
  int nranks;
  uint64_t target_step;
  uint64_t base_step;  // this connection's step count when the collective began here
  // The channel's connection in the other direction, so one waiting thread shows both;
  // other_peer is -1 when this operation has not used it.
  int other_peer;
  const uint64_t* other_step;                   // steps posted (send) or consumed (recv), ever
  const std::atomic<uint64_t>* other_counter;   // the peer's head (send) or tail (recv)
  uint64_t other_base_step;
  const char* algorithm;  // "RING", "TREE" or "PAT": which peers a rank waits on
  // Every connection of the channel this operation uses, on the algorithm's own graph (a
  // ring's prev and next, a tree's parent and children, PAT's peer per dimension each way),
  // so a debugger reads each one's counters, not only the one this thread waits on.
  const SendEnd* const* send_ends;
  int nsend_ends;
  const RecvEnd* const* recv_ends;
  int nrecv_ends;
};

// Throughput shaping of one sending end: each step takes the link's time for its bytes.
class LinkPacer {
 public:
  // Returns once the link has moved `bytes` handed to it at `handed` (after the steps before).
  void pace(size_t bytes, double gbps, std::chrono::steady_clock::time_point handed = std::chrono::steady_clock::now());

 private:
  std::chrono::steady_clock::time_point next_free_{};
};

// The sending end of one connection as seen by one rank.
struct SendEnd {
  Connection* conn;
  uint64_t* step;  // steps this rank has posted on the connection, ever
  LinkPacer* pacer;
  int peer;
  int channel;
  double gbps;
  bool dead;            // dead-link fault: steps are posted locally but never delivered
  bool net;             // the connection crosses nodes: the receiver's proxy is told of each step
  NetProxyOp* proxy;    // this operation's send ProxyOp on it, or null
  // NCCL_NET=Socket on a connection between nodes: isend only queues the step, so it is on
  // the network (SendWait) as soon as the GPU has it, also while the receiver holds it back.
  bool eager = false;
  // A lost-credit fault: the receiver's head as this sender last heard of it, which no
  // longer moves; null when the credits arrive.
  const uint64_t* credit_heard = nullptr;
  // The SIMGPU_FAULTS tokens behind `dead` and `credit_heard`, told when they take effect.
  const std::string* dead_fault = nullptr;
  const std::string* credit_fault = nullptr;
  // This operation's first step on the connection (set by the transport at its first send):
  // the ProxyStep numbers count from it.
  uint64_t base = 0;
  bool started = false;
  // Its place on the algorithm's graph: "ring-next", "tree-parent", "tree-child", "pat", "p2p".
  const char* role = "p2p";
  // NET: this end's NIC, an index into simnccl_net_devs (NCCL's sendNetResources.netDev); -1
  // on a connection inside a node.
  int net_dev = -1;
};

struct RecvEnd {
  Connection* conn;
  uint64_t* step;  // steps this rank has consumed, ever
  int peer;
  int channel;
  NetProxyOp* proxy;  // this operation's receive ProxyOp on it, or null
  uint64_t base = 0;  // as SendEnd's
  bool started = false;
  const char* role = "p2p";  // "ring-prev", "tree-parent", "tree-child", "pat", "p2p"
  int net_dev = -1;          // as SendEnd's (NCCL's recvNetResources.netDev)
};

class StepTransport {
 public:
  // `peer_watch`: the communicator's, when it spans nodes (null otherwise).
  StepTransport(SharedSegment& segment, const std::atomic<bool>& abort, int rank, const Op& op,
                NetPeerWatch* peer_watch = nullptr)
      : segment_(segment), abort_(abort), rank_(rank), op_(op), peer_watch_(peer_watch) {}
  StepTransport(const StepTransport&) = delete;
  StepTransport& operator=(const StepTransport&) = delete;

  // The channel's connections this operation uses, for WaitSite; the ends outlive the transport.
  void setChannelEnds(std::vector<const SendEnd*> sends, std::vector<const RecvEnd*> recvs) {
    channel_sends_ = std::move(sends);
    channel_recvs_ = std::move(recvs);
  }

  // False when the communicator was aborted while waiting.
  bool send(SendEnd& end, const void* src, size_t bytes);

  // Waits for the next step and hands its payload to consume(const void* data, size_t bytes)
  // before freeing the slot. A step that belongs to another collective (a mismatch) is
  // never consumed: the rank waits as a real one would, until abort.
  template <typename Consume>
  bool recv(RecvEnd& end, Consume&& consume) {
    const char* data = awaitStep(end);
    if (data == nullptr) return false;
    consume(static_cast<const void*>(data), segment_.shape().slot_bytes);
    releaseStep(end);
    return true;
  }

 private:
  const char* awaitStep(RecvEnd& end);
  void releaseStep(RecvEnd& end);
  WaitSite siteFor(int direction, int peer, int channel, uint64_t target) const;

  SharedSegment& segment_;
  const std::atomic<bool>& abort_;
  int rank_;
  const Op& op_;
  NetPeerWatch* peer_watch_;
  // The ends this operation used last in each direction, for WaitSite.
  const SendEnd* send_end_ = nullptr;
  const RecvEnd* recv_end_ = nullptr;
  std::vector<const SendEnd*> channel_sends_;
  std::vector<const RecvEnd*> channel_recvs_;
};

}  // namespace simnccl

extern "C" {
// Returns the observed counter once it reached target_step, or UINT64_MAX on abort.
uint64_t simnccl_wait_peer(const simnccl::WaitSite* site, simnccl::StepCounter* counter, uint64_t target_step,
                           const std::atomic<bool>* abort);
// A dead-rank fault: the device stops making progress here until the communicator is aborted.
void simnccl_device_stalled(int rank, int channel, uint64_t seq, const char* op, const std::atomic<bool>* abort);
// The step that arrived belongs to a different collective than this rank's.
void simnccl_wait_matching_op(const simnccl::WaitSite* site, uint64_t found_seq, const char* found_op,
                              const std::atomic<bool>* abort);
}
