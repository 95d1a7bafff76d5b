#pragma once
// The process's emulated CUDA context: devices, live stream and event handles.
// Handles are opaque ids, never reused, so a destroyed or garbage handle is caught
// as cudaErrorInvalidResourceHandle. A fork child gets a fresh Runtime: the parent's
// worker threads do not exist there, so the old one is abandoned, not torn down.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <memory>
#include <mutex>
#include <vector>

#include "device.h"
#include "event.h"
#include "stream.h"

namespace simgpu {

class Runtime {
 public:
  static Runtime& current();

  int deviceCount() const { return static_cast<int>(devices_.size()); }
  bool validDevice(int ordinal) const { return ordinal >= 0 && ordinal < deviceCount(); }
  Device& device(int ordinal) { return *devices_.at(ordinal); }

  // Null for a destroyed or unknown handle. 0 and cudaStreamLegacy name the legacy
  // default stream of the current device, cudaStreamPerThread this thread's stream.
  std::shared_ptr<Stream> resolveStream(cudaStream_t handle);
  cudaStream_t createStream(Stream::Kind kind, int priority);
  bool destroyStream(cudaStream_t handle);

  cudaEvent_t createEvent(unsigned flags);
  std::shared_ptr<Event> resolveEvent(cudaEvent_t handle);
  bool destroyEvent(cudaEvent_t handle);

  // Peer access of `device` to `peer`; false when it already was (enable) or was not
  // (disable) in that state.
  bool setPeerAccess(int device, int peer, bool enable);

  // Stream worker threads run kernels on their stream's device.
  static void enterStreamThread(int device);
  static void setRunningKernel(const char* name);
  static const char* runningKernel();
  static int threadDevice();
  static void setThreadDevice(int device);

  Runtime();

 private:
  std::shared_ptr<Stream> perThreadStream(int device);

  std::vector<std::unique_ptr<Device>> devices_;
  std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Stream>> streams_;
  std::map<uint64_t, std::shared_ptr<Event>> events_;
  std::set<std::pair<int, int>> peer_access_;
};

}  // namespace simgpu
