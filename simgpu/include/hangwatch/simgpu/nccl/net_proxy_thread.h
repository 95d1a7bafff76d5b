#pragma once
// The receiving half of NCCL's proxy progress thread for one communicator: it notices
// data arriving from the network on this rank's NET receive operations whatever the
// rank's GPU (its channel threads) is doing, so a step the GPU has not consumed yet
// shows RecvGPUWait even while that GPU is busy or hung. Senders ring this rank's
// doorbell after every step they deliver; the thread sleeps on it otherwise, for a
// millisecond at most while a receive is held back (net_proxy_op.h).
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hangwatch/simgpu/nccl/net_proxy_op.h"
#include "hangwatch/simgpu/nccl/step_counter.h"

namespace simnccl {

class NetProxyThread {
 public:
  // `aborted`: once the communicator is aborted the proxy reports nothing more, as NCCL's.
  NetProxyThread(StepCounter& doorbell, const std::atomic<bool>& aborted);
  ~NetProxyThread();
  NetProxyThread(const NetProxyThread&) = delete;
  NetProxyThread& operator=(const NetProxyThread&) = delete;

  void watch(std::shared_ptr<NetProxyOp> op);

 private:
  void run();

  StepCounter& doorbell_;
  const std::atomic<bool>& aborted_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<NetProxyOp>> ops_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace simnccl
