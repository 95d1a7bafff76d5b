// Event handles: record on a stream, query, wait and time between two records.
#include <cuda_runtime_api.h>

#include <chrono>

#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/per_thread_stream.h"
#include "hangwatch/simgpu/cuda/runtime.h"

using simgpu::recordError;
using simgpu::Runtime;

extern "C" {

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return recordError(cudaErrorInvalidValue);
  constexpr unsigned kKnown = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
  if ((flags & ~kKnown) != 0) return recordError(cudaErrorInvalidValue);
  *event = Runtime::current().createEvent(flags);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!Runtime::current().destroyEvent(event)) return recordError(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Event> e = rt.resolveEvent(event);
  std::shared_ptr<simgpu::Stream> s = rt.resolveStream(stream);
  if (!e || !s) return recordError(cudaErrorInvalidResourceHandle);
  if ((flags & ~static_cast<unsigned>(cudaEventRecordExternal)) != 0) return recordError(cudaErrorInvalidValue);
  // "event and stream must be on the same CUDA context" (cuda_runtime_api.h, cudaEventRecord).
  if (e->device() != s->device()) return recordError(cudaErrorInvalidResourceHandle);
  if (cudaError_t err = rt.checkStreamUse(*s); err != cudaSuccess) return recordError(err);
  if (std::shared_ptr<simgpu::CaptureSequence> c = s->capture()) {
    // Recorded in a capture: a node that records the event at every launch of the graph.
    e->recordCaptured(c, s.get());
    c->add(simgpu::GraphNode{"cudaEventRecord", [e, flags](cudaStream_t launch) {
      Runtime& runtime = Runtime::current();
      std::shared_ptr<simgpu::Stream> on = runtime.resolveStream(launch);
      if (!on) return cudaErrorInvalidResourceHandle;
      e->record(e, runtime.device(on->device()), *on);
      return cudaSuccess;
    }});
    return cudaSuccess;
  }
  e->record(e, rt.device(s->device()), *s);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return cudaEventRecordWithFlags(event, stream, cudaEventRecordDefault);
}

// "not permitted on an event which was last recorded in a capturing stream" (driver_types.h).
cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::shared_ptr<simgpu::Event> e = Runtime::current().resolveEvent(event);
  if (!e) return recordError(cudaErrorInvalidResourceHandle);
  if (e->captured()) return recordError(cudaErrorCapturedEvent);
  return e->query();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::shared_ptr<simgpu::Event> e = Runtime::current().resolveEvent(event);
  if (!e) return recordError(cudaErrorInvalidResourceHandle);
  if (e->captured()) return recordError(cudaErrorCapturedEvent);
  e->synchronize();
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Event> a = rt.resolveEvent(start);
  std::shared_ptr<simgpu::Event> b = rt.resolveEvent(end);
  if (!a || !b || a->timingDisabled() || b->timingDisabled() || a->device() != b->device())
    return recordError(cudaErrorInvalidResourceHandle);
  if (a->captured() || b->captured()) return recordError(cudaErrorCapturedEvent);
  if (!a->lastRecord() || !b->lastRecord()) return recordError(cudaErrorInvalidResourceHandle);
  auto t0 = a->completedAt();
  auto t1 = b->completedAt();
  if (!t0 || !t1) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*t1 - *t0).count();
  return cudaSuccess;
}

cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return cudaEventRecord(event, simgpu::perThreadDefault(stream));
}

cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  return cudaEventRecordWithFlags(event, simgpu::perThreadDefault(stream), flags);
}

}  // extern "C"
