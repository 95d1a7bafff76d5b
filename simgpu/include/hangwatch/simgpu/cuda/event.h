#pragma once
// One emulated CUDA event. A record queues a marker on the stream; the stream's
// worker stamps the device's modeled time (device_clock.h) when it reaches the marker.
// Re-recording starts a new generation, so a stale marker still in flight cannot stamp
// the new record.
#include <chrono>
#include <mutex>
#include <optional>

#include <cuda_runtime_api.h>

#include "hangwatch/simgpu/cuda/capture.h"
#include "hangwatch/simgpu/cuda/stream_progress.h"

namespace simgpu {

class Device;
class Stream;

class Event {
 public:
  Event(unsigned flags, int device) : flags_(flags), device_(device) {}

  unsigned flags() const { return flags_; }
  // The device current when it was created: it can be recorded only on that device's streams.
  int device() const { return device_; }
  bool timingDisabled() const { return (flags_ & cudaEventDisableTiming) != 0; }

  // `self` is this event; the queued marker keeps it alive past cudaEventDestroy.
  void record(const std::shared_ptr<Event>& self, Device& device, Stream& stream);
  // Recorded into a capture instead: the event is "captured" until recorded again
  // outside one (cudaErrorCapturedEvent for queries), and a stream waiting on it joins
  // that capture.
  void recordCaptured(std::shared_ptr<CaptureSequence> capture, Stream* stream);
  bool captured();
  // The capture and stream it was last recorded in, while that capture is going on.
  std::shared_ptr<CaptureSequence> activeCapture(Stream** recorded_on);

  // The last record, or nothing when the event was never recorded.
  std::optional<Milestone> lastRecord();

  // cudaSuccess when the last record has completed or there is none, else cudaErrorNotReady.
  cudaError_t query();
  void synchronize();
  // Completion time of the last record, if recorded and complete.
  std::optional<std::chrono::steady_clock::time_point> completedAt();

 private:
  void stamp(uint64_t generation);

  const unsigned flags_;
  const int device_;
  std::mutex mutex_;
  uint64_t generation_ = 0;
  std::optional<Milestone> record_;
  bool captured_ = false;
  std::weak_ptr<CaptureSequence> capture_;
  Stream* captured_on_ = nullptr;
  std::optional<std::chrono::steady_clock::time_point> stamped_at_;
};

}  // namespace simgpu
