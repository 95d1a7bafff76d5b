#include "hangwatch/simgpu/nccl/ring_channel.h"

#include "hangwatch/simgpu/nccl/algorithm.h"
#include "hangwatch/simgpu/faults.h"

#include <immintrin.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

namespace simnccl {
namespace {

constexpr int kSpinsBeforeSleep = 64;
constexpr auto kSpinAtMost = std::chrono::microseconds(100);  // a step of the link's time spins up to this
constexpr int kSleepMs = 20;  // also how often a waiter looks at the abort flag
constexpr uint64_t kAborted = std::numeric_limits<uint64_t>::max();

void napUntilAbort() { std::this_thread::sleep_for(std::chrono::milliseconds(kSleepMs)); }

// The launch reserved this operation's receive steps from a different start than the
// channel reached: simnccl's step count for the operation disagrees with its run.
void reportBaseMismatch(uint64_t reserved, uint64_t actual) {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true))
    std::fprintf(stderr, "simnccl: internal error: receive proxy reserved step %llu, the channel is at %llu\n",
                 static_cast<unsigned long long>(reserved), static_cast<unsigned long long>(actual));
}

}  // namespace

void LinkPacer::pace(size_t bytes, double gbps, std::chrono::steady_clock::time_point handed) {
  using namespace std::chrono;
  auto now = steady_clock::now();
  auto cost = duration_cast<steady_clock::duration>(duration<double>(static_cast<double>(bytes) / (gbps * 1e9)));
  next_free_ = std::max(handed, next_free_) + cost;
  // The step is on the wire for its whole modeled time, also when the sender's CPU is
  // slower than the link (a loaded machine): the wire time NCCL's profiler shows for the
  // step is the link's, not the emulation's. Short waits spin: a sleep's wake-up on a
  // loaded machine would add the scheduler's delay to every step. Longer ones sleep most
  // of the way, so slow links do not take the CPU from the ranks' other threads.
  if (next_free_ - now > kSpinAtMost) std::this_thread::sleep_until(next_free_ - kSpinAtMost / 2);
  while (steady_clock::now() < next_free_) _mm_pause();
}

WaitSite StepTransport::siteFor(int direction, int peer, int channel, uint64_t target) const {
  WaitSite site{rank_,
                channel,
                peer,
                direction,
                op_.seq,
                opName(op_.kind),
                segment_.shape().nranks,
                target,
                direction == kWaitSend ? send_end_->base : recv_end_->base,
                -1,
                nullptr,
                nullptr,
                0,
                algoName(op_.algo),
                channel_sends_.data(),
                static_cast<int>(channel_sends_.size()),
                channel_recvs_.data(),
                static_cast<int>(channel_recvs_.size())};
  if (direction == kWaitRecv && send_end_ != nullptr) {
    site.other_peer = send_end_->peer;
    site.other_step = send_end_->step;
    site.other_counter = &send_end_->conn->head.value;
    site.other_base_step = send_end_->base;
  } else if (direction == kWaitSend && recv_end_ != nullptr) {
    site.other_peer = recv_end_->peer;
    site.other_step = recv_end_->step;
    site.other_counter = &recv_end_->conn->tail.value;
    site.other_base_step = recv_end_->base;
  }
  return site;
}

bool StepTransport::send(SendEnd& end, const void* src, size_t bytes) {
  uint64_t step = *end.step;
  if (!end.started) {
    end.started = true;
    end.base = step;
  }
  send_end_ = &end;
  const int op_step = static_cast<int>(step - end.base);
  // IB: the step waits for the receiver's clear-to-send in SendPeerWait; sockets: on the network.
  if (end.proxy != nullptr) end.eager ? end.proxy->handedToNetwork(op_step, bytes) : end.proxy->gpuReady(op_step);
  if (step + 1 > static_cast<uint64_t>(kSteps)) {
    const uint64_t credit = step + 1 - kSteps;
    StepCounter* head = &end.conn->head;
    StepCounter heard{};  // a lost-credit fault: what this sender heard, which never moves
    if (end.credit_heard != nullptr && *end.credit_heard < credit) {
      heard.value.store(*end.credit_heard);
      head = &heard;
      if (end.credit_fault != nullptr) simgpu::FaultLedger::instance().fired(*end.credit_fault);
    }
    WaitSite site = siteFor(kWaitSend, end.peer, end.channel, credit);
    NetPeerWatch::Wait watched(end.net ? peer_watch_ : nullptr, end.peer, false);
    if (simnccl_wait_peer(&site, head, credit, &abort_) == kAborted) return false;
  }
  char* slot = segment_.slotData(*end.conn, step);
  if (bytes > 0) std::memcpy(slot, src, bytes);
  end.conn->slot_header[step % kSteps] = SlotHeader{op_.seq, static_cast<uint32_t>(op_.kind), static_cast<uint32_t>(bytes)};
  *end.step = step + 1;
  // Paced from before the hand-over is recorded, so the profiler's SendWait..done is the
  // link's time and not also the bookkeeping around it.
  const auto handed = std::chrono::steady_clock::now();
  if (end.proxy != nullptr && !end.eager) end.proxy->handedToNetwork(op_step, bytes);
  if (end.net && peer_watch_ != nullptr) peer_watch_->wrote(end.peer);
  end.pacer->pace(bytes, end.gbps, handed);
  // A dead link never completes its steps: the sender's stay handed to the network.
  if (end.dead) {
    if (end.dead_fault != nullptr) simgpu::FaultLedger::instance().fired(*end.dead_fault);
    return true;
  }
  // Done before the receiver is woken: waking it may cost this thread its CPU, and the
  // step's wire time would take in the scheduler's delay.
  if (end.proxy != nullptr) end.proxy->networkDone(op_step);
  publishStep(end.conn->tail, step + 1);
  if (end.net) addToCounter(segment_.rank(end.peer).net_doorbell, 1);
  return true;
}

const char* StepTransport::awaitStep(RecvEnd& end) {
  uint64_t step = *end.step;
  if (!end.started) {
    end.started = true;
    end.base = step;
    if (end.proxy != nullptr && end.proxy->base() != step) reportBaseMismatch(end.proxy->base(), step);
  }
  recv_end_ = &end;
  WaitSite site = siteFor(kWaitRecv, end.peer, end.channel, step + 1);
  {
    NetPeerWatch::Wait watched(end.net_dev >= 0 ? peer_watch_ : nullptr, end.peer, true);
    if (simnccl_wait_peer(&site, &end.conn->tail, step + 1, &abort_) == kAborted) return nullptr;
  }
  if (end.proxy != nullptr) end.proxy->dataSeen(static_cast<int>(step - end.base));
  const SlotHeader& header = end.conn->slot_header[step % kSteps];
  if (isCollective(op_.kind) && (header.seq != op_.seq || header.op != static_cast<uint32_t>(op_.kind))) {
    simnccl_wait_matching_op(&site, header.seq, opName(static_cast<OpKind>(header.op)), &abort_);
    return nullptr;
  }
  return segment_.slotData(*end.conn, step);
}

void StepTransport::releaseStep(RecvEnd& end) {
  uint64_t step = *end.step + 1;
  *end.step = step;
  // The proxy posts the next receive before the freed slot is offered to the sender.
  if (end.proxy != nullptr) end.proxy->gpuConsumed(static_cast<int>(step - 1 - end.base));
  publishStep(end.conn->head, step);
}

}  // namespace simnccl

using simnccl::kAborted;

extern "C" __attribute__((noinline)) uint64_t simnccl_wait_peer(const simnccl::WaitSite* site,
                                                                simnccl::StepCounter* counter,
                                                                uint64_t target_step, const std::atomic<bool>* abort) {
  // Volatile so they live in the frame at -O2: this is what forensics reads from a hung rank.
  volatile int wait_rank = site->rank;
  volatile int wait_channel = site->channel;
  volatile int wait_peer = site->peer;
  volatile int wait_direction = site->direction;
  volatile uint64_t wait_seq = site->seq;
  const char* volatile wait_op = site->op;
  volatile uint64_t wait_target_step = target_step;
  volatile uint64_t wait_observed_step = counter->value.load(std::memory_order_acquire);
  // The whole site (other direction, op start) and the communicator (abort is its member) for gdb-scripts/.
  const simnccl::WaitSite* volatile wait_site = site;
  const std::atomic<bool>* volatile wait_abort = abort;
  (void)wait_rank, (void)wait_channel, (void)wait_peer, (void)wait_direction, (void)wait_seq, (void)wait_op;
  (void)wait_site, (void)wait_abort;

  int spins = 0;
  while (wait_observed_step < wait_target_step) {
    if (abort->load(std::memory_order_acquire)) return kAborted;
    if (++spins < simnccl::kSpinsBeforeSleep) {
      _mm_pause();
    } else {
      uint32_t word = counter->futex_word.load(std::memory_order_seq_cst);
      if (counter->value.load(std::memory_order_acquire) < target_step)
        simnccl::sleepOnCounter(*counter, word, simnccl::kSleepMs);
    }
    wait_observed_step = counter->value.load(std::memory_order_acquire);
  }
  return wait_observed_step;
}

extern "C" __attribute__((noinline)) void simnccl_device_stalled(int rank, int channel, uint64_t seq, const char* op,
                                                                 const std::atomic<bool>* abort) {
  volatile int stalled_rank = rank;
  volatile int stalled_channel = channel;
  volatile uint64_t stalled_seq = seq;
  const char* volatile stalled_op = op;
  const std::atomic<bool>* volatile stalled_abort = abort;  // a member of the communicator: gdb finds it from here
  (void)stalled_rank, (void)stalled_channel, (void)stalled_seq, (void)stalled_op, (void)stalled_abort;
  // The loop stays in this frame: a trailing call would become a tail jump and the frame would vanish.
  while (!abort->load(std::memory_order_acquire)) simnccl::napUntilAbort();
}

extern "C" __attribute__((noinline)) void simnccl_wait_matching_op(const simnccl::WaitSite* site, uint64_t found_seq,
                                                                   const char* found_op,
                                                                   const std::atomic<bool>* abort) {
  volatile int wait_channel = site->channel;
  volatile int wait_peer = site->peer;
  volatile uint64_t wait_seq = site->seq;
  const char* volatile wait_op = site->op;
  volatile uint64_t arrived_seq = found_seq;
  const char* volatile arrived_op = found_op;
  const simnccl::WaitSite* volatile wait_site = site;
  const std::atomic<bool>* volatile wait_abort = abort;
  (void)wait_channel, (void)wait_peer, (void)wait_seq, (void)wait_op, (void)arrived_seq, (void)arrived_op;
  (void)wait_site, (void)wait_abort;
  while (!abort->load(std::memory_order_acquire)) simnccl::napUntilAbort();
}
