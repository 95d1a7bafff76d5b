#pragma once
// A test double for EventApi: events are numbered handles whose completion and
// GPU time the test sets, so timing logic can be driven without a device.
#include <cstdint>
#include <map>
#include <vector>

#include "hangwatch/watchdog/event_api.h"

namespace hangwatch::watchdog::testing {

class FakeEventApi : public EventApi {
 public:
  struct State {
    bool recorded = false;
    cudaStream_t stream = nullptr;
    bool done = false;
    double gpu_ms = 0;
  };

  cudaError_t create(cudaEvent_t* event) override {
    if (fail_create_after >= 0 && created >= fail_create_after) return cudaErrorMemoryAllocation;
    *event = reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(++created));
    events[*event] = State{};
    return cudaSuccess;
  }
  cudaError_t destroy(cudaEvent_t event) override {
    ++destroyed;
    return events.erase(event) ? cudaSuccess : cudaErrorInvalidResourceHandle;
  }
  cudaError_t record(cudaEvent_t event, cudaStream_t stream) override {
    auto it = events.find(event);
    if (it == events.end()) return cudaErrorInvalidResourceHandle;
    it->second = State{true, stream, false, 0};
    recorded_order.push_back(event);
    return cudaSuccess;
  }
  cudaError_t query(cudaEvent_t event) override {
    ++queries;
    auto it = events.find(event);
    if (it == events.end()) return cudaErrorInvalidResourceHandle;
    return it->second.done ? cudaSuccess : cudaErrorNotReady;
  }
  cudaError_t elapsedMs(float* ms, cudaEvent_t start, cudaEvent_t end) override {
    auto a = events.find(start), b = events.find(end);
    if (a == events.end() || b == events.end()) return cudaErrorInvalidResourceHandle;
    if (!a->second.done || !b->second.done) return cudaErrorNotReady;
    *ms = static_cast<float>(b->second.gpu_ms - a->second.gpu_ms);
    return cudaSuccess;
  }

  // The device reached `event` at `gpu_ms` on its own clock.
  void complete(cudaEvent_t event, double gpu_ms) {
    events[event].done = true;
    events[event].gpu_ms = gpu_ms;
  }

  std::map<cudaEvent_t, State> events;
  std::vector<cudaEvent_t> recorded_order;
  int created = 0;
  int destroyed = 0;
  int queries = 0;
  int fail_create_after = -1;
};

}  // namespace hangwatch::watchdog::testing
