#include "hangwatch/watchdog/host_call_slots.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace hangwatch::watchdog {

HostCallSlot* HostCallSlots::forThisThread() {
  thread_local const HostCallSlots* owner = nullptr;
  thread_local HostCallSlot* slot = nullptr;
  if (owner == this) return slot;
  size_t i = claimed_.fetch_add(1, std::memory_order_relaxed);
  owner = this;
  slot = i < kCapacity ? &slots_[i] : nullptr;
  if (slot) slot->tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_relaxed);
  return slot;
}

void HostCallSlots::forEachBusy(const std::function<void(const BusyHostCall&)>& fn) const {
  size_t n = std::min(claimed_.load(std::memory_order_acquire), kCapacity);
  for (size_t i = 0; i < n; ++i) {
    const HostCallSlot& s = slots_[i];
    int64_t since = s.enter_ns.load(std::memory_order_acquire);
    if (since == 0) continue;
    fn({s.call.load(std::memory_order_relaxed), s.comm.load(std::memory_order_relaxed),
        s.seq_plus1.load(std::memory_order_relaxed), s.tid.load(std::memory_order_relaxed), since,
        JoiningComm{s.joining_hash.load(std::memory_order_relaxed), s.joining_rank.load(std::memory_order_relaxed),
                    s.joining_size.load(std::memory_order_relaxed)}});
  }
}

HostCallScope::HostCallScope(HostCallSlots* slots, const char* call, uintptr_t comm, uint64_t seq_plus1,
                             int64_t now_ns, const JoiningComm& joining) {
  if (slots == nullptr) return;
  HostCallSlot* s = slots->forThisThread();
  if (s == nullptr || s->enter_ns.load(std::memory_order_relaxed) != 0) return;
  s->call.store(call, std::memory_order_relaxed);
  s->comm.store(comm, std::memory_order_relaxed);
  s->seq_plus1.store(seq_plus1, std::memory_order_relaxed);
  s->joining_hash.store(joining.hash, std::memory_order_relaxed);
  s->joining_rank.store(joining.rank, std::memory_order_relaxed);
  s->joining_size.store(joining.size, std::memory_order_relaxed);
  s->enter_ns.store(now_ns, std::memory_order_release);
  slot_ = s;
}

void HostCallSlots::noteIdMade(uint64_t hash) {
  const size_t n = ids_made_count_.fetch_add(1, std::memory_order_acq_rel);
  ids_made_[n % kIdsKept].store(hash, std::memory_order_release);
}

std::vector<uint64_t> HostCallSlots::idsMade() const {
  std::vector<uint64_t> out;
  const size_t n = std::min(ids_made_count_.load(std::memory_order_acquire), kIdsKept);
  for (size_t i = 0; i < n; ++i)
    if (uint64_t h = ids_made_[i].load(std::memory_order_acquire); h != 0) out.push_back(h);
  return out;
}

HostCallScope::~HostCallScope() {
  if (slot_) slot_->enter_ns.store(0, std::memory_order_release);
}

}  // namespace hangwatch::watchdog
