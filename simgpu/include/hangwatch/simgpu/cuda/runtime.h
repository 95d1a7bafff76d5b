#pragma once
// The process's emulated CUDA context: devices, live stream and event handles.
// Handles are opaque ids, never reused, so a destroyed or garbage handle is caught
// as cudaErrorInvalidResourceHandle. A fork child gets a fresh Runtime: the parent's
// worker threads do not exist there, so the old one is abandoned, not torn down.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "hangwatch/simgpu/cuda/capture.h"
#include "hangwatch/simgpu/cuda/device.h"
#include "hangwatch/simgpu/cuda/event.h"
#include "hangwatch/simgpu/cuda/stream.h"

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

  // Queues `task` on `stream` as a launch does or, while the stream is capturing,
  // records it as a node of the capture's graph (cross-stream waits become capture
  // order). Fails by the capture rules: the legacy stream beside a capturing blocking
  // stream (cudaErrorStreamCaptureImplicit, which invalidates that capture) and work
  // on an invalidated capture (cudaErrorStreamCaptureInvalidated).
  cudaError_t submit(Stream& stream, StreamTask task, Milestone* done = nullptr);
  // The capture rules for stream work: the errors above, or cudaSuccess. A query
  // (cudaStreamIsCapturing) reports the implicit dependency without invalidating.
  cudaError_t checkStreamUse(Stream& stream, bool invalidate = true);

  // Capture sequences (capture.h).
  std::shared_ptr<CaptureSequence> beginCapture(Stream& stream, cudaStreamCaptureMode mode);
  // A "potentially unsafe" call (cudaMalloc, synchronous copies, device synchronize, ...)
  // under the calling thread's capture mode (cudaThreadExchangeStreamCaptureMode):
  // cudaErrorStreamCaptureUnsupported, invalidating the captures that forbid it.
  cudaError_t checkUnsafeCall();
  static cudaStreamCaptureMode& threadCaptureMode();

  cudaGraph_t addGraph(std::shared_ptr<Graph> graph);
  std::shared_ptr<Graph> resolveGraph(cudaGraph_t handle);
  bool destroyGraph(cudaGraph_t handle);
  cudaGraphExec_t addGraphExec(std::shared_ptr<GraphExec> exec);
  std::shared_ptr<GraphExec> resolveGraphExec(cudaGraphExec_t handle);
  bool destroyGraphExec(cudaGraphExec_t handle);

  cudaEvent_t createEvent(unsigned flags);
  std::shared_ptr<Event> resolveEvent(cudaEvent_t handle);
  bool destroyEvent(cudaEvent_t handle);

  // Peer access of `device` to `peer`; false when it already was (enable) or was not
  // (disable) in that state.
  bool setPeerAccess(int device, int peer, bool enable);

  // A device's primary context, as the real runtime makes it at the first call that needs
  // one on that device (cudaSetDevice, a stream, an event, an allocation): what the driver
  // API (cuDevicePrimaryCtxGetState, cuCtxGetCurrent) reports of the runtime's use.
  void noteContextUse(int device);
  bool contextActive(int device) const;

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
  std::unique_ptr<std::atomic<bool>[]> context_active_;
  std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Stream>> streams_;
  std::map<uint64_t, std::shared_ptr<Event>> events_;
  std::set<std::pair<int, int>> peer_access_;
  uint64_t next_capture_id_ = 1;
  std::vector<std::weak_ptr<CaptureSequence>> captures_;
  std::map<uint64_t, std::shared_ptr<Graph>> graphs_;
  std::map<uint64_t, std::shared_ptr<GraphExec>> graph_execs_;
};

}  // namespace simgpu
