#pragma once
// What NCCL's NET transport does when the process at the other end of a connection between
// nodes is gone (killed, crashed, exited; its node's kernel closed its sockets and destroyed
// its queue pairs): NCCL's proxy on this side fails the operation in progress with
// ncclRemoteError and stores it for ncclCommGetAsyncError (src/proxy.cc,
// proxyState->asyncResult; src/init.cc), while the kernel on the GPU goes on waiting.
//   Socket: a receive reads end-of-file ("socketProgress: Connection closed by remote peer",
//           src/misc/socket.cc) and a send is reset: a wait on the connection fails at once.
//   IB:     only a work request posted to the gone peer fails, once the queue pair's retries
//           ran out ("NET/IB: Got CQE with error", src/transport/net_ib/p2p.cc), after
//           (NCCL_IB_RETRY_CNT + 1) x 4.096 us x 2^NCCL_IB_TIMEOUT (defaults 7 and 20: 34 s;
//           src/transport/net_ib/connect.cc). Here: a receive posted (its clear-to-send written
//           to the sender) or a step sent (written into its buffer) after the peer was seen
//           gone. A receive posted before it went, and a sender waiting for a clear-to-send that
//           never comes, post nothing to it: no error, ever (RC queue pairs have no keepalive).
// A process that is stopped (SIGSTOP) keeps its connections: nothing fails. A whole node that
// loses power closes nothing either; simgpu has no such fault.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"

namespace simnccl {

struct ActiveWait {
  int peer;
  bool recv;
  std::chrono::steady_clock::time_point since;
};

class NetPeerWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // Watches the members of `nodes` on another node than `rank`'s; errors go to `async_error`.
  NetPeerWatch(SharedSegment& segment, const NodeTopology& nodes, int rank, NetKind net,
               std::atomic<ncclResult_t>& async_error);
  ~NetPeerWatch();
  NetPeerWatch(const NetPeerWatch&) = delete;
  NetPeerWatch& operator=(const NetPeerWatch&) = delete;

  // Ends and joins the watching thread (the communicator's shutdown: ncclCommAbort and
  // ncclCommDestroy return with it gone, as NCCL's own threads are). Once is enough; any thread.
  void stop();

  // A channel thread waits on a connection between nodes with `peer` while this lives.
  class Wait {
   public:
    Wait(NetPeerWatch* watch, int peer, bool recv);
    ~Wait();
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

   private:
    NetPeerWatch* watch_;
    std::list<ActiveWait>::iterator it_;
  };

  // A step was written to `peer` (the sender's RDMA write, NCCL's isend).
  void wrote(int peer);

  // How long IB's queue pair retries before a work request completes in error.
  static Clock::duration ibRetryTime();

 private:
  void run();
  void look(Clock::time_point now);
  void fail(int peer, const char* how);

  SharedSegment& segment_;
  const int rank_;
  const NetKind net_;
  const Clock::duration ib_retry_;
  std::atomic<ncclResult_t>& async_error_;
  std::vector<int> remote_;  // members on other nodes
  std::mutex mutex_;
  std::list<ActiveWait> waits_;
  std::map<int, Clock::time_point> gone_;  // peer -> when first seen gone
  std::map<int, Clock::time_point> failing_;  // peer -> when a write posted to it since fails
  bool failed_ = false;
  std::atomic<bool> stopping_{false};
  std::once_flag stopped_;
  std::thread thread_;
};

}  // namespace simnccl
