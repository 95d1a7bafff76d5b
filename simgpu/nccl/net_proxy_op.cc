#include "hangwatch/simgpu/nccl/net_proxy_op.h"

#include <unistd.h>

#include <algorithm>

namespace simnccl {
namespace {

namespace np = hangwatch::nccl_profiler;

}  // namespace

NetProxyOp::NetProxyOp(ProfilerHooks& hooks, int mask, const ProxyOpShape& shape, Connection* conn, uint64_t base)
    : hooks_(hooks),
      steps_wanted_((mask & (np::kProxyStep | np::kNetPlugin)) != 0),
      shape_(shape),
      conn_(conn),
      base_(base),
      held_back_(shape.registered && !shape.is_send) {
  std::lock_guard<std::mutex> lock(mutex_);
  if ((mask & (np::kProxyOp | np::kProxyStep | np::kNetPlugin)) != 0) {
    np::EventDescr d{};
    d.type = np::kProxyOp;
    d.parentObj = shape.parent;
    d.rank = hooks.rank();
    d.proxyOp.pid = ::getpid();  // the process whose proxy posts it (no PXN here)
    d.proxyOp.channelId = static_cast<uint8_t>(shape.channel);
    d.proxyOp.peer = shape.peer;
    d.proxyOp.nSteps = shape.nsteps;  // sliceSteps is 1: one step per slot
    d.proxyOp.chunkSize = static_cast<int>(shape.chunk_bytes);
    d.proxyOp.isSend = shape.is_send ? 1 : 0;
    handle_ = hooks_.start(d);
    np::EventStateArgs args{};
    hooks_.record(handle_, np::kProxyOpInProgress, &args);
  }
  post();
}

// ncclProfilerStart{Send,Recv}ProxyStepEvent: the handle goes where the step's last one
// was, stopped or not.
void NetProxyOp::startStep(int step) {
  if (!steps_wanted_) return;
  np::EventDescr d{};
  d.type = np::kProxyStep;
  d.parentObj = handle_;
  d.rank = hooks_.rank();
  d.proxyStep.step = step;
  steps_[step % kSteps] = hooks_.start(d);
}

// net.cc posts while posted < done + maxDepth: each posted step is started, then put in
// its first state once the buffer is handed out (send) or the receive is posted (recv).
void NetProxyOp::post() {
  while (posted_ < shape_.nsteps && posted_ < done_ + kSteps) {
    const int step = posted_;
    startStep(step);
    if (held_back_) return;  // not posted: the next pass starts it again
    ++posted_;
    recordStep(step, shape_.is_send ? np::kProxyStepSendGPUWait : np::kProxyStepRecvWait);
  }
}

void NetProxyOp::proxyPass() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (held_back_) {
    post();
    return;
  }
  const uint64_t tail = conn_->tail.value.load(std::memory_order_acquire);
  if (tail > base_) arrivalsUpTo(static_cast<int>(std::min<uint64_t>(tail - base_, shape_.nsteps)));
}

bool NetProxyOp::heldBack() {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_back_;
}

void NetProxyOp::kernelReached() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!held_back_) return;
  held_back_ = false;
  post();
}

// As ncclProfilerRecordProxyStepEventState: only under a started ProxyOp event.
void NetProxyOp::recordStep(int step, np::EventState state) {
  void* h = steps_[step % kSteps];
  if (handle_ == nullptr || h == nullptr) return;
  np::EventStateArgs args{};
  args.proxyStep.transSize = trans_size_;
  hooks_.record(h, state, &args);
}

void NetProxyOp::completed(int step) {
  void*& h = steps_[step % kSteps];
  hooks_.stop(h);
  h = nullptr;
  done_ = step + 1;
  post();
  if (done_ == shape_.nsteps) {
    hooks_.stop(handle_);
    handle_ = nullptr;
  }
}

void NetProxyOp::gpuReady(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (step < posted_) recordStep(step, np::kProxyStepSendPeerWait);
}

void NetProxyOp::handedToNetwork(int step, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (step >= posted_) return;
  trans_size_ = bytes;
  recordStep(step, np::kProxyStepSendWait);
}

void NetProxyOp::networkDone(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (step == done_ && step < posted_) completed(step);
}

// Received (RecvFlushWait, with the received size), then handed to the GPU once the
// flush is done (RecvGPUWait): nothing needs a flush here, so both at once.
void NetProxyOp::arrivalsUpTo(int limit) {
  limit = std::min(limit, posted_);
  for (; arrived_ < limit; ++arrived_) {
    trans_size_ = conn_->slot_header[(base_ + static_cast<uint64_t>(arrived_)) % kSteps].bytes;
    recordStep(arrived_, np::kProxyStepRecvFlushWait);
    recordStep(arrived_, np::kProxyStepRecvGPUWait);
  }
}

void NetProxyOp::dataSeen(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  arrivalsUpTo(step + 1);
}

void NetProxyOp::gpuConsumed(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  arrivalsUpTo(step + 1);
  if (step == done_ && step < arrived_) completed(step);
}

bool NetProxyOp::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ == shape_.nsteps;
}

}  // namespace simnccl
