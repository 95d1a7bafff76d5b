#pragma once
// One emulated GPU: the streams living on it and the legacy default stream, whose
// implicit synchronization with blocking streams is decided here when work is queued.
#include <memory>
#include <mutex>
#include <vector>

#include "hangwatch/simgpu/cuda/stream.h"

namespace simgpu {

class Device {
 public:
  explicit Device(int ordinal) : ordinal_(ordinal) {}

  int ordinal() const { return ordinal_; }

  void addStream(std::shared_ptr<Stream> stream);
  void removeStream(const Stream* stream);

  // Queues `task` on `stream` (a stream of this device) with the legacy default
  // stream rules: legacy work waits for prior work of every blocking stream, and
  // blocking-stream work waits for prior legacy work. Non-blocking streams do neither.
  Milestone enqueue(Stream& stream, StreamTask task);

  std::shared_ptr<Stream> legacyStream();

  // True when everything queued so far on `stream` (and, for the legacy stream,
  // what it implicitly waits for) has finished.
  bool idle(Stream& stream);

  // Waits for all work queued so far on every stream of the device.
  void synchronize();

 private:
  std::vector<Milestone> implicitDependencies(const Stream& stream);

  const int ordinal_;
  std::mutex mutex_;
  std::shared_ptr<Stream> legacy_;
  std::vector<std::shared_ptr<Stream>> streams_;
};

}  // namespace simgpu
