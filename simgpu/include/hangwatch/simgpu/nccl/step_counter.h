#pragma once
// A monotonic step counter in shared memory, the sim analogue of an NCCL
// connection's head or tail. Publishing wakes waiters with a shared futex so
// blocked ranks sleep instead of burning this machine's two cores.
#include <atomic>
#include <cstdint>

namespace simnccl {

struct alignas(64) StepCounter {
  std::atomic<uint64_t> value;
  std::atomic<uint32_t> futex_word;  // bumped on every publish
  std::atomic<uint32_t> waiters;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters live in memory shared between processes");

void publishStep(StepCounter& counter, uint64_t value);

// Sleeps until the counter may have changed from `seen_word`, or `timeout_ms` passed.
void sleepOnCounter(StepCounter& counter, uint32_t seen_word, int timeout_ms);

}  // namespace simnccl

namespace simnccl {
// Adds to the counter (several writers, e.g. an init barrier) and wakes waiters.
uint64_t addToCounter(StepCounter& counter, uint64_t delta);
}  // namespace simnccl
