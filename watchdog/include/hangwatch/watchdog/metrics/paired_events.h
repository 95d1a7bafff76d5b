#pragma once
// The events both hangwatch's link profiler and the job's own plugin take (ProxyOp and
// KernelCh, and each ProxyOp's ProxySteps), as the profiler chain hands them to NCCL:
// one record holds both plugins' handles, and a ProxyOp's record holds one slot per step
// in flight (NCCL_STEPS), indexed by step number as NCCL indexes its own handles, so a
// step NCCL starts again without stopping it (a held-back receive) reuses its slot.
// Records live in one region reserved up front and touched only as far as the most
// records ever in use at once: bounded memory, no allocation and no lock per event (a
// lock-free free list; a lock only when the region grows), and a pointer is told apart
// from the job plugin's own handles by its address alone. Past the capacity, claim()
// fails and the chain falls back to giving the job's plugin the event alone.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace hangwatch::watchdog {

struct ChainContext;

inline constexpr int kPairedStepSlots = 8;  // NCCL_STEPS

struct PairedStep {
  void* ours = nullptr;
  void* job = nullptr;
};

struct PairedEvent {
  std::atomic<uint32_t> next_free{0};  // free list link: index + 1, 0 for none
  std::atomic<ChainContext*> owner{nullptr};
  bool remote = false;  // another process's proxy operation (PXN): its context is not ours
  void* ours = nullptr;
  void* job = nullptr;
  PairedStep steps[kPairedStepSlots];
};

class PairedEventPool {
 public:
  explicit PairedEventPool(size_t capacity);
  ~PairedEventPool();
  PairedEventPool(const PairedEventPool&) = delete;
  PairedEventPool& operator=(const PairedEventPool&) = delete;

  // A cleared record owned by `owner` (null for a remote operation), or null when full.
  PairedEvent* claim(ChainContext* owner, bool remote);
  void release(PairedEvent* event);
  // Every record `owner` still holds: NCCL is done with them (its communicator went).
  void releaseAllOf(const ChainContext* owner);

  // What a handle NCCL passes back is: one of the records, one of their step slots, or
  // neither (then it is the job plugin's own). `step_of` gets the step's record.
  PairedEvent* asEvent(void* handle) const;
  PairedStep* asStep(void* handle, PairedEvent** step_of) const;

  size_t inUse() const { return in_use_.load(std::memory_order_relaxed); }
  size_t capacity() const { return capacity_; }

 private:
  bool inRegion(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    auto base = reinterpret_cast<uintptr_t>(records_);
    return a >= base && a < base + capacity_ * sizeof(PairedEvent);
  }

  const size_t capacity_;
  PairedEvent* records_;              // capacity_ records, reserved with mmap, touched as used
  std::atomic<uint64_t> free_head_{0};  // (tag << 32) | (index + 1): the tag defeats ABA
  std::atomic<uint32_t> high_water_{0};  // records ever constructed
  std::mutex grow_mutex_;                 // making a record; reading all of them at a finalize
  std::atomic<size_t> in_use_{0};
};

}  // namespace hangwatch::watchdog
