#pragma once
// One operation of NCCL's NET transport on one connection, as its proxy progresses it and
// reports it to a profiler plugin (src/transport/net.cc, sendProxyProgress and
// recvProxyProgress; src/plugin/profiler.cc): one per (operation, channel, peer,
// direction) on a connection between nodes. Steps are numbered from 0 within the
// operation and posted at most NCCL_STEPS ahead of the last completed one.
//   send: posted: SendGPUWait; the GPU has the data: SendPeerWait; handed to the
//         network: SendWait; the network completed it: stopped.
//   recv: posted: RecvWait; the data arrived: RecvFlushWait, RecvGPUWait; the GPU
//         consumed it: stopped.
// The ProxyOp event is stopped once every step is.
// A receive into a buffer registered for the network (NCCL's local registration of a
// p2p buffer, ncclRegisterP2pNetBuffer) is held back until the receiving kernel reached
// the operation: until then each proxy pass starts step 0's event again without stopping
// it (recvProxyProgress: sub->reg && !sub->regBufferReady: "continue" after
// ncclProfilerStartRecvProxyStepEvent); NCCL's proxy passes as fast as it loops, the
// proxy thread here once a millisecond (net_proxy_thread.h).
// Calls for one operation come from
// the launching thread, its channel thread and (receives) the proxy thread; they are
// serialised here, so the plugin never sees two calls on one handle at once.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"

namespace simnccl {

struct ProxyOpShape {
  bool is_send;
  int channel;
  int peer;            // the remote rank, in the communicator
  int nsteps;
  size_t chunk_bytes;  // bytes per step
  void* parent;        // the task's Coll or P2p event
  bool registered = false;  // a receive into a network-registered buffer
};

class NetProxyOp {
 public:
  // Starts the ProxyOp event (if `mask` asks for proxy events) and posts the first steps.
  // A receive watches `conn`, whose tail counts base + i once step i arrived.
  NetProxyOp(ProfilerHooks& hooks, int mask, const ProxyOpShape& shape, Connection* conn, uint64_t base);
  NetProxyOp(const NetProxyOp&) = delete;
  NetProxyOp& operator=(const NetProxyOp&) = delete;

  // Send side, on the channel thread.
  void gpuReady(int step);
  void handedToNetwork(int step, size_t bytes);
  void networkDone(int step);

  // Receive side: the proxy thread records arrivals as the tail shows them; the channel
  // thread records them itself if it sees the data first.
  // One pass of the proxy thread over this receive: a held-back step is started again,
  // else arrivals are recorded.
  void proxyPass();
  bool heldBack();
  // The receiving kernel reached the operation (NCCL: it wrote connFifo's first size).
  void kernelReached();
  void dataSeen(int step);
  void gpuConsumed(int step);

  bool finished();
  uint64_t base() const { return base_; }

 private:
  void post();
  void startStep(int step);
  void arrivalsUpTo(int limit);
  void completed(int step);
  void recordStep(int step, hangwatch::nccl_profiler::EventState state);

  std::mutex mutex_;
  ProfilerHooks& hooks_;
  const bool steps_wanted_;
  const ProxyOpShape shape_;
  Connection* const conn_;
  const uint64_t base_;
  void* handle_ = nullptr;  // the ProxyOp event
  void* steps_[kSteps] = {};
  bool held_back_;
  int posted_ = 0;
  int arrived_ = 0;
  int done_ = 0;
  size_t trans_size_ = 0;  // NCCL's sub->transSize: the last step's size, passed with every state
};

}  // namespace simnccl
