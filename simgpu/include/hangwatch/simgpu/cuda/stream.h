#pragma once
// One emulated CUDA stream: a worker thread running queued device work in order.
// The worker owns a reference to the stream, so destroying the handle lets queued
// work finish (as cudaStreamDestroy does). A stuck stream blocks the host only as a GPU's
// does: once its queue is full (waitForRoom), a launch onto it waits.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hangwatch/simgpu/cuda/capture.h"
#include "hangwatch/simgpu/runtime.h"
#include "hangwatch/simgpu/cuda/stream_progress.h"

namespace simgpu {

struct StreamTask {
  std::string name;              // the kernel name a tool would see
  DeviceWork work;               // may be empty: a pure ordering marker
  std::vector<Milestone> after;  // cross-stream dependencies, waited before `work`
  std::chrono::steady_clock::time_point submitted{};  // set by Stream::submit: when the host issued it
};

class Stream {
 public:
  enum class Kind { kLegacyDefault, kBlocking, kNonBlocking };

  static std::shared_ptr<Stream> start(int device, Kind kind, int priority, uint64_t id);

  int device() const { return device_; }
  Kind kind() const { return kind_; }
  int priority() const { return priority_; }
  uint64_t id() const { return id_; }
  unsigned flags() const;

  // Queues a task; the returned milestone is reached when it has finished.
  Milestone submit(StreamTask task);
  // Returns once fewer than `depth` tasks are queued (0: at once). Called before the device
  // lock is taken, so a full stream holds up only the launches onto it.
  void waitForRoom(size_t depth);
  // The milestone of the last queued task (reached at once when nothing is queued).
  Milestone tail();
  // No more work will come; the worker exits once the queue drains.
  void close();

  // The capture sequence the stream belongs to, null when it is not capturing.
  std::shared_ptr<CaptureSequence> capture();
  void setCapture(std::shared_ptr<CaptureSequence> capture);

  Stream(int device, Kind kind, int priority, uint64_t id);

 private:
  static void run(std::shared_ptr<Stream> self);

  const int device_;
  const Kind kind_;
  const int priority_;
  const uint64_t id_;
  const std::shared_ptr<StreamProgress> progress_ = std::make_shared<StreamProgress>();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable room_;
  std::deque<StreamTask> queue_;
  uint64_t submitted_ = 0;
  bool closed_ = false;
  std::shared_ptr<CaptureSequence> capture_;
  // Device time the worker's last task ended at (device_clock.h); the worker's alone.
  std::chrono::steady_clock::time_point model_cursor_{};
};

}  // namespace simgpu
