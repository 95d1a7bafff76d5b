#include "hangwatch/watchdog/metrics/paired_events.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <new>

namespace hangwatch::watchdog {
namespace {

constexpr uint64_t pack(uint64_t tag, uint32_t index_plus_one) { return (tag << 32) | index_plus_one; }
constexpr uint32_t indexOf(uint64_t head) { return static_cast<uint32_t>(head); }
constexpr uint64_t tagOf(uint64_t head) { return head >> 32; }

}  // namespace

PairedEventPool::PairedEventPool(size_t capacity) : capacity_(capacity), records_(nullptr) {
  void* p = mmap(nullptr, capacity * sizeof(PairedEvent), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) records_ = static_cast<PairedEvent*>(p);
}

PairedEventPool::~PairedEventPool() {
  if (records_ != nullptr) munmap(records_, capacity_ * sizeof(PairedEvent));
}

PairedEvent* PairedEventPool::claim(ChainContext* owner, bool remote) {
  if (records_ == nullptr) return nullptr;
  PairedEvent* event = nullptr;
  uint64_t head = free_head_.load(std::memory_order_acquire);
  while (indexOf(head) != 0) {
    PairedEvent* top = &records_[indexOf(head) - 1];
    const uint32_t next = top->next_free.load(std::memory_order_relaxed);
    if (free_head_.compare_exchange_weak(head, pack(tagOf(head) + 1, next), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      event = top;
      break;
    }
  }
  if (event == nullptr) {
    // Growing is rare (the most records ever in use at once); releaseAllOf must not read
    // a record while it is being made.
    std::lock_guard<std::mutex> lock(grow_mutex_);
    const uint32_t index = high_water_.load(std::memory_order_relaxed);
    if (index >= capacity_) return nullptr;
    event = new (&records_[index]) PairedEvent;
    high_water_.store(index + 1, std::memory_order_release);
  }
  event->remote = remote;
  event->owner.store(owner, std::memory_order_release);
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return event;
}

void PairedEventPool::release(PairedEvent* event) {
  event->owner.store(nullptr, std::memory_order_relaxed);
  event->remote = false;
  event->ours = event->job = nullptr;
  for (PairedStep& s : event->steps) s = PairedStep{};
  const auto index_plus_one = static_cast<uint32_t>(event - records_ + 1);
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  do {
    event->next_free.store(indexOf(head), std::memory_order_relaxed);
  } while (!free_head_.compare_exchange_weak(head, pack(tagOf(head) + 1, index_plus_one), std::memory_order_release,
                                             std::memory_order_relaxed));
  in_use_.fetch_sub(1, std::memory_order_relaxed);
}

void PairedEventPool::releaseAllOf(const ChainContext* owner) {
  if (owner == nullptr) return;
  std::lock_guard<std::mutex> lock(grow_mutex_);
  const uint32_t n = high_water_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i)
    if (records_[i].owner.load(std::memory_order_acquire) == owner) release(&records_[i]);
}

PairedEvent* PairedEventPool::asEvent(void* handle) const {
  if (!inRegion(handle)) return nullptr;
  const auto offset = reinterpret_cast<uintptr_t>(handle) - reinterpret_cast<uintptr_t>(records_);
  return offset % sizeof(PairedEvent) == 0 ? static_cast<PairedEvent*>(handle) : nullptr;
}

PairedStep* PairedEventPool::asStep(void* handle, PairedEvent** step_of) const {
  if (!inRegion(handle)) return nullptr;
  const auto offset = reinterpret_cast<uintptr_t>(handle) - reinterpret_cast<uintptr_t>(records_);
  PairedEvent* event = &records_[offset / sizeof(PairedEvent)];
  const auto in_event = offset % sizeof(PairedEvent);
  if (in_event < offsetof(PairedEvent, steps)) return nullptr;
  *step_of = event;
  return &event->steps[(in_event - offsetof(PairedEvent, steps)) / sizeof(PairedStep)];
}

}  // namespace hangwatch::watchdog
