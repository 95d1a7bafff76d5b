// Stream handles: creation, destruction, synchronization and the cross-stream wait.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/per_thread_stream.h"
#include "hangwatch/simgpu/cuda/runtime.h"

using simgpu::recordError;
using simgpu::Runtime;
using simgpu::Stream;

namespace {

bool isLegacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

// Waiting for or querying a capturing stream is not permitted (its work does not run)
// and invalidates the capture.
cudaError_t refuseWhileCapturing(Stream& s) {
  std::shared_ptr<simgpu::CaptureSequence> c = s.capture();
  if (!c) return cudaSuccess;
  c->invalidate();
  return cudaErrorStreamCaptureUnsupported;
}

}  // namespace

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  if (pStream == nullptr) return recordError(cudaErrorInvalidValue);
  if ((flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0) return recordError(cudaErrorInvalidValue);
  Stream::Kind kind = (flags & cudaStreamNonBlocking) ? Stream::Kind::kNonBlocking : Stream::Kind::kBlocking;
  *pStream = Runtime::current().createStream(kind, std::clamp(priority, -5, 0));
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) { return cudaStreamCreateWithPriority(pStream, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
    return recordError(cudaErrorInvalidResourceHandle);
  if (!Runtime::current().destroyStream(stream)) return recordError(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = refuseWhileCapturing(*s); e != cudaSuccess) return recordError(e);
  if (isLegacy(stream)) {
    // The legacy stream's sync covers what its next work would wait for: queue a marker.
    simgpu::Milestone done;
    if (cudaError_t e = rt.submit(*s, simgpu::StreamTask{"cudaStreamSynchronize", {}, {}}, &done); e != cudaSuccess)
      return recordError(e);
    done.wait();
  } else {
    s->tail().wait();
  }
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = refuseWhileCapturing(*s); e != cudaSuccess) return recordError(e);
  if (cudaError_t e = rt.checkStreamUse(*s); e != cudaSuccess) return recordError(e);
  return rt.device(s->device()).idle(*s) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  std::shared_ptr<simgpu::Event> e = rt.resolveEvent(event);
  if (!s || !e) return recordError(cudaErrorInvalidResourceHandle);
  if ((flags & ~static_cast<unsigned>(cudaEventWaitExternal)) != 0) return recordError(cudaErrorInvalidValue);
  if (cudaError_t err = rt.checkStreamUse(*s); err != cudaSuccess) return recordError(err);
  std::shared_ptr<simgpu::CaptureSequence> capturing = s->capture();
  Stream* recorded_on = nullptr;
  if (std::shared_ptr<simgpu::CaptureSequence> c = e->activeCapture(&recorded_on)) {
    // An event of a capture: a stream outside joins it (a fork); inside, the origin
    // waiting on a forked stream's event joins that stream back.
    if (!capturing) {
      s->setCapture(c);
      c->fork(s.get());
      return cudaSuccess;
    }
    if (capturing != c) {
      capturing->invalidate();
      c->invalidate();
      return recordError(cudaErrorStreamCaptureMerge);
    }
    if (s.get() == c->origin() && recorded_on != nullptr) c->rejoin(recorded_on);
    return cudaSuccess;
  }
  if (capturing) {
    // A dependency on work outside the capture crosses its boundary, unless the wait is
    // captured as an external event wait node (cudaEventWaitExternal).
    if ((flags & cudaEventWaitExternal) == 0) {
      capturing->invalidate();
      return recordError(cudaErrorStreamCaptureIsolation);
    }
    capturing->add(simgpu::GraphNode{"cudaStreamWaitEvent", [e](cudaStream_t launch) {
      Runtime& runtime = Runtime::current();
      std::shared_ptr<Stream> on = runtime.resolveStream(launch);
      if (!on) return cudaErrorInvalidResourceHandle;
      std::optional<simgpu::Milestone> last = e->lastRecord();
      if (!last || last->reached()) return cudaSuccess;
      return runtime.submit(*on, simgpu::StreamTask{"cudaStreamWaitEvent", {}, {*last}});
    }});
    return cudaSuccess;
  }
  // An event never recorded (or already complete) imposes nothing.
  std::optional<simgpu::Milestone> record = e->lastRecord();
  if (!record || record->reached()) return cudaSuccess;
  return recordError(rt.submit(*s, simgpu::StreamTask{"cudaStreamWaitEvent", {}, {*record}}));
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags) {
  if (flags == nullptr) return recordError(cudaErrorInvalidValue);
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(hStream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  *flags = s->flags();
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority) {
  if (priority == nullptr) return recordError(cudaErrorInvalidValue);
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(hStream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  *priority = s->priority();
  return cudaSuccess;
}

cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long* streamId) {
  if (streamId == nullptr) return recordError(cudaErrorInvalidValue);
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(hStream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  *streamId = s->id();
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int* device) {
  if (device == nullptr) return recordError(cudaErrorInvalidValue);
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(hStream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  *device = s->device();
  return cudaSuccess;
}

// Per-thread-default-stream builds: stream 0 is the thread's stream (per_thread_stream.h).
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  return cudaStreamSynchronize(simgpu::perThreadDefault(stream));
}
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream) { return cudaStreamQuery(simgpu::perThreadDefault(stream)); }
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return cudaStreamWaitEvent(simgpu::perThreadDefault(stream), event, flags);
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int* flags) {
  return cudaStreamGetFlags(simgpu::perThreadDefault(stream), flags);
}
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t stream, int* priority) {
  return cudaStreamGetPriority(simgpu::perThreadDefault(stream), priority);
}
cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  return cudaStreamGetId(simgpu::perThreadDefault(stream), id);
}
cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  return cudaStreamGetDevice(simgpu::perThreadDefault(stream), device);
}

// Host functions on a stream: they run on the stream's worker in order with its work.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  if (fn == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  return recordError(rt.submit(*s, simgpu::StreamTask{"cudaLaunchHostFunc", [fn, userData] { fn(userData); }, {}}));
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags) {
  if (callback == nullptr || flags != 0) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  return recordError(rt.submit(
      *s, simgpu::StreamTask{"cudaStreamAddCallback", [stream, callback, userData] { callback(stream, cudaSuccess, userData); }, {}}));
}

cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  return cudaLaunchHostFunc(simgpu::perThreadDefault(stream), fn, userData);
}

cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                       unsigned int flags) {
  return cudaStreamAddCallback(simgpu::perThreadDefault(stream), callback, userData, flags);
}

}  // extern "C"
