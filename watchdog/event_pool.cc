#include "hangwatch/watchdog/event_pool.h"

#include <string>

#include <fmt/format.h>

namespace hangwatch::watchdog {

EventPool::EventPool(EventApi& api, size_t capacity) : api_(api), capacity_(capacity), free_(capacity) {}

Expected<size_t> EventPool::fill() {
  while (created_ < capacity_) {
    cudaEvent_t e = nullptr;
    if (cudaError_t rc = api_.create(&e); rc != cudaSuccess)
      return Error{fmt::format("cudaEventCreate failed with error {} after {} events", static_cast<int>(rc), created_)};
    free_.tryPush(e);
    ++created_;
  }
  return created_;
}

bool EventPool::acquire(cudaEvent_t* event) {
  if (free_.tryPop(event)) return true;
  exhausted_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void EventPool::release(cudaEvent_t event) { free_.tryPush(event); }

void EventPool::destroyIdle() {
  cudaEvent_t e;
  while (free_.tryPop(&e)) api_.destroy(e);
}

}  // namespace hangwatch::watchdog
