#pragma once
// How far a stream's worker has got: the count of tasks it has finished. Tasks,
// events and host waits name a point in a stream as a Milestone and block on it.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace simgpu {

class StreamProgress {
 public:
  // One more task finished, at `model_end` on the device clock (device_clock.h).
  void advance(std::chrono::steady_clock::time_point model_end);
  bool reached(uint64_t seq);
  void waitFor(uint64_t seq);
  // The device time the latest finished task ended at: a task waiting on this stream
  // starts no earlier.
  std::chrono::steady_clock::time_point modelEnd();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t completed_ = 0;
  std::chrono::steady_clock::time_point model_end_{};
};

// The point a stream reaches once its `seq`-th task has finished.
struct Milestone {
  std::shared_ptr<StreamProgress> progress;
  uint64_t seq = 0;

  bool reached() const { return progress->reached(seq); }
  void wait() const { progress->waitFor(seq); }
  // Device time at which it was passed (at the latest: the stream's latest finished task).
  std::chrono::steady_clock::time_point modelTime() const { return progress->modelEnd(); }

  // A point already passed: what work recorded into a capture "completes" at.
  static Milestone passed() { return Milestone{std::make_shared<StreamProgress>(), 0}; }
};

}  // namespace simgpu
