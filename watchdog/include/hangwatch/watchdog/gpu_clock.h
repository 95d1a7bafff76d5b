#pragma once
// Maps GPU event times onto the host's CLOCK_MONOTONIC: a reference event recorded
// on an idle stream completes (almost) when it is recorded, so its host time is
// known; any other event's time is the reference's plus cudaEventElapsedTime.
// Re-calibrated periodically because elapsed times are floats in milliseconds.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "hangwatch/watchdog/event_api.h"

namespace hangwatch::watchdog {

class GpuClock {
 public:
  // A reference older than this is replaced: float milliseconds lose precision as they grow.
  static constexpr int64_t kRecalibrateNs = 60'000'000'000;

  explicit GpuClock(EventApi& api) : api_(api) {}

  // Records `ref` on `idle_stream`; it becomes the reference once it completes.
  void calibrate(cudaEvent_t ref, cudaStream_t idle_stream, int64_t host_ns);
  // Promotes a completed calibration; returns the event that is no longer needed
  // (the previous reference), or nullptr.
  cudaEvent_t poll();
  bool ready() const { return current_ != nullptr; }
  bool calibrating() const { return pending_ != nullptr; }
  int64_t calibratedAtNs() const { return current_host_ns_; }
  std::optional<int64_t> hostNs(cudaEvent_t completed_event);

 private:
  EventApi& api_;
  cudaEvent_t current_ = nullptr;
  int64_t current_host_ns_ = 0;
  cudaEvent_t pending_ = nullptr;
  int64_t pending_host_ns_ = 0;
};

}  // namespace hangwatch::watchdog
