#include "hangwatch/watchdog/deferred_ops.h"

#include <algorithm>
#include <vector>

namespace hangwatch::watchdog {

bool DeferredOps::add(const DeferredOp& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < kSlots; ++i) {
    if (used_[i]) continue;
    slots_[i] = op;
    used_[i] = true;
    order_[i] = next_order_++;
    return true;
  }
  ++dropped_;
  return false;
}

bool DeferredOps::has(uintptr_t comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < kSlots; ++i)
    if (used_[i] && slots_[i].comm == comm) return true;
  return false;
}

void DeferredOps::take(uintptr_t comm, const std::function<void(const DeferredOp&)>& fn) {
  std::vector<std::pair<uint64_t, DeferredOp>> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < kSlots; ++i) {
      if (!used_[i] || slots_[i].comm != comm) continue;
      taken.emplace_back(order_[i], slots_[i]);
      used_[i] = false;
    }
  }
  std::sort(taken.begin(), taken.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [order, op] : taken) fn(op);
}

}  // namespace hangwatch::watchdog
