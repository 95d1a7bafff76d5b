#pragma once
// Timing events created up front and recycled: the interposers take two per timed
// operation and the poller gives them back once both completed. An empty pool
// means the operation goes untimed (counted), never a cudaEventCreate on the hot path.
#include <atomic>
#include <cstdint>

#include "hangwatch/watchdog/bounded_queue.h"
#include "hangwatch/watchdog/event_api.h"
#include "hangwatch/common/expected.h"

namespace hangwatch::watchdog {

class EventPool {
 public:
  EventPool(EventApi& api, size_t capacity);

  // Creates the events; the pool keeps those it got if creation fails part way.
  Expected<size_t> fill();
  bool acquire(cudaEvent_t* event);
  void release(cudaEvent_t event);
  // Destroys the events still in the pool (tests; a live job keeps them to the end).
  void destroyIdle();

  size_t created() const { return created_; }
  uint64_t exhausted() const { return exhausted_.load(std::memory_order_relaxed); }

 private:
  EventApi& api_;
  size_t capacity_;
  size_t created_ = 0;
  BoundedQueue<cudaEvent_t> free_;
  std::atomic<uint64_t> exhausted_{0};
};

}  // namespace hangwatch::watchdog
