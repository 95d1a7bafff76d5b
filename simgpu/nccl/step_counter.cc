#include "hangwatch/simgpu/nccl/step_counter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace simnccl {
namespace {

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  // Shared (not FUTEX_PRIVATE) futexes: the peer that publishes is another process.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, timeout, nullptr, 0);
}

}  // namespace

void publishStep(StepCounter& counter, uint64_t value) {
  counter.value.store(value, std::memory_order_release);
  counter.futex_word.fetch_add(1, std::memory_order_seq_cst);
  if (counter.waiters.load(std::memory_order_seq_cst) != 0) futex(&counter.futex_word, FUTEX_WAKE, INT_MAX, nullptr);
}

void sleepOnCounter(StepCounter& counter, uint32_t seen_word, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
  counter.waiters.fetch_add(1, std::memory_order_seq_cst);
  futex(&counter.futex_word, FUTEX_WAIT, seen_word, &ts);
  counter.waiters.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace simnccl

namespace simnccl {
uint64_t addToCounter(StepCounter& counter, uint64_t delta) {
  uint64_t v = counter.value.fetch_add(delta, std::memory_order_acq_rel) + delta;
  counter.futex_word.fetch_add(1, std::memory_order_seq_cst);
  if (counter.waiters.load(std::memory_order_seq_cst) != 0) futex(&counter.futex_word, FUTEX_WAKE, INT_MAX, nullptr);
  return v;
}
}  // namespace simnccl
