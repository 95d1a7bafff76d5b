#include "hangwatch/simgpu/nccl/net_proxy_thread.h"

#include <pthread.h>

#include <algorithm>

namespace simnccl {
namespace {

constexpr int kIdleWakeMs = 200;  // also how soon a stop request is seen without a doorbell
constexpr int kHeldBackPassMs = 1;  // NCCL's proxy loops without sleeping while it holds a step back

}  // namespace

NetProxyThread::NetProxyThread(StepCounter& doorbell, const std::atomic<bool>& aborted)
    : doorbell_(doorbell), aborted_(aborted), thread_([this] { run(); }) {}

NetProxyThread::~NetProxyThread() {
  stopping_.store(true, std::memory_order_release);
  addToCounter(doorbell_, 1);
  thread_.join();
}

void NetProxyThread::watch(std::shared_ptr<NetProxyOp> op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.push_back(std::move(op));
  }
  addToCounter(doorbell_, 1);  // data may have arrived before the operation was watched
}

void NetProxyThread::run() {
  pthread_setname_np(pthread_self(), "simnccl-proxy");
  while (!stopping_.load(std::memory_order_acquire)) {
    // Read before looking, so a step delivered meanwhile makes the sleep return at once.
    const uint32_t word = doorbell_.futex_word.load(std::memory_order_seq_cst);
    bool held_back = false;
    if (!aborted_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& op : ops_) {
        op->proxyPass();
        held_back |= op->heldBack();
      }
      ops_.erase(std::remove_if(ops_.begin(), ops_.end(), [](const auto& op) { return op->finished(); }), ops_.end());
    }
    sleepOnCounter(doorbell_, word, held_back ? kHeldBackPassMs : kIdleWakeMs);
  }
}

}  // namespace simnccl
