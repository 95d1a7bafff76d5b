// Memory: "device" memory is host memory tracked in the AllocationTable; copies and
// sets are device work that takes bytes / (SIMGPU_COPY_GBPS * device speed) seconds.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <optional>

#include "hangwatch/simgpu/cuda/allocation_table.h"
#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/per_thread_stream.h"
#include "hangwatch/simgpu/cuda/runtime.h"
#include "hangwatch/simgpu/config.h"

using simgpu::Allocation;
using simgpu::AllocationTable;
using simgpu::MemoryKind;
using simgpu::recordError;
using simgpu::Runtime;

namespace {

std::chrono::nanoseconds copyTime(size_t bytes) {
  double seconds = static_cast<double>(bytes) / (simgpu::simConfig().copy_gbps * 1e9);
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

// "Potentially unsafe" during a capture (cudaThreadExchangeStreamCaptureMode): allocation,
// freeing and the synchronous copies and sets are not stream work a graph could replay.
cudaError_t checkUnsafe() { return recordError(Runtime::current().checkUnsafeCall()); }

cudaError_t allocate(void** ptr, size_t size, MemoryKind kind, unsigned host_flags = 0) {
  if (ptr == nullptr) return recordError(cudaErrorInvalidValue);
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  Runtime::current().noteContextUse(Runtime::threadDevice());
  *ptr = AllocationTable::instance().allocate(size, kind, Runtime::threadDevice(), host_flags);
  if (*ptr == nullptr) return recordError(cudaErrorMemoryAllocation);
  return cudaSuccess;
}

cudaError_t queueCopy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                      bool wait) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return recordError(cudaErrorInvalidMemcpyDirection);
  if (count > 0 && (dst == nullptr || src == nullptr)) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  simgpu::DeviceWork work = [dst, src, count] {
    if (count > 0) std::memmove(dst, src, count);
    simgpu::occupyDevice(copyTime(count));
  };
  simgpu::Milestone done;
  if (cudaError_t e = rt.submit(*s, simgpu::StreamTask{"simgpu_memcpy", std::move(work), {}}, &done); e != cudaSuccess)
    return recordError(e);
  if (wait) done.wait();
  return cudaSuccess;
}

cudaError_t queueSet(void* ptr, int value, size_t count, cudaStream_t stream, bool wait) {
  if (count > 0 && ptr == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  simgpu::DeviceWork work = [ptr, value, count] {
    if (count > 0) std::memset(ptr, value, count);
    simgpu::occupyDevice(copyTime(count));
  };
  simgpu::Milestone done;
  if (cudaError_t e = rt.submit(*s, simgpu::StreamTask{"simgpu_memset", std::move(work), {}}, &done); e != cudaSuccess)
    return recordError(e);
  if (wait) done.wait();
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) { return allocate(devPtr, size, MemoryKind::kDevice); }

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  return allocate(devPtr, size, MemoryKind::kManaged);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return allocate(ptr, size, MemoryKind::kHostPinned); }

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  constexpr unsigned kKnown = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if ((flags & ~kKnown) != 0) return recordError(cudaErrorInvalidValue);
  return allocate(pHost, size, MemoryKind::kHostPinned, flags);
}

cudaError_t cudaFree(void* devPtr) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  if (devPtr == nullptr) return cudaSuccess;
  if (!AllocationTable::instance().release(devPtr, true)) return recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  if (ptr == nullptr) return cudaSuccess;
  if (!AllocationTable::instance().release(ptr, false)) return recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return recordError(cudaErrorInvalidValue);
  *total = simgpu::kDeviceMemoryBytes;
  *free = *total - AllocationTable::instance().deviceBytesInUse(Runtime::threadDevice());
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return recordError(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof(*attributes));
  std::optional<simgpu::Allocation> a = AllocationTable::instance().find(ptr);
  if (!a) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    attributes->hostPointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  attributes->type = a->kind == MemoryKind::kDevice    ? cudaMemoryTypeDevice
                     : a->kind == MemoryKind::kManaged ? cudaMemoryTypeManaged
                                                       : cudaMemoryTypeHost;
  attributes->device = a->device;
  attributes->devicePointer = const_cast<void*>(ptr);
  attributes->hostPointer = a->kind == MemoryKind::kDevice ? nullptr : const_cast<void*>(ptr);
  return cudaSuccess;
}

// Synchronous: queued on the legacy default stream and waited for, as cudaMemcpy is.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  return queueCopy(dst, src, count, kind, cudaStreamLegacy, true);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return queueCopy(dst, src, count, kind, stream, false);
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  return queueSet(devPtr, value, count, cudaStreamLegacy, true);
}

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return queueSet(devPtr, value, count, stream, false);
}

// Per-thread-default-stream builds: the synchronous calls order against the thread's
// stream, and stream 0 of the async ones is that stream (per_thread_stream.h).
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  return queueCopy(dst, src, count, kind, cudaStreamPerThread, true);
}

cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  return queueCopy(dst, src, count, kind, simgpu::perThreadDefault(stream), false);
}

cudaError_t cudaMemset_ptds(void* devPtr, int value, size_t count) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  return queueSet(devPtr, value, count, cudaStreamPerThread, true);
}

cudaError_t cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return queueSet(devPtr, value, count, simgpu::perThreadDefault(stream), false);
}

// Copies between devices: device memory is host memory here, so a peer copy is a copy
// queued like any other (synchronous on the legacy stream, or on `stream`).
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  if (cudaError_t e = checkUnsafe(); e != cudaSuccess) return e;
  Runtime& rt = Runtime::current();
  if (!rt.validDevice(dstDevice) || !rt.validDevice(srcDevice)) return recordError(cudaErrorInvalidDevice);
  return queueCopy(dst, src, count, cudaMemcpyDeviceToDevice, cudaStreamLegacy, true);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                cudaStream_t stream) {
  Runtime& rt = Runtime::current();
  if (!rt.validDevice(dstDevice) || !rt.validDevice(srcDevice)) return recordError(cudaErrorInvalidDevice);
  return queueCopy(dst, src, count, cudaMemcpyDeviceToDevice, stream, false);
}

// Pinned and registered host memory is mapped at the same address for the device
// (unified addressing).
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (pDevice == nullptr || flags != 0) return recordError(cudaErrorInvalidValue);
  std::optional<Allocation> a = AllocationTable::instance().find(pHost);
  if (!a || !simgpu::isHostKind(a->kind)) return recordError(cudaErrorInvalidValue);
  *pDevice = pHost;
  return cudaSuccess;
}

// With unified addressing all pinned memory is mapped, whatever flags it was made with.
cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost) {
  if (pFlags == nullptr) return recordError(cudaErrorInvalidValue);
  std::optional<Allocation> a = AllocationTable::instance().find(pHost);
  if (!a || a->kind != MemoryKind::kHostPinned) return recordError(cudaErrorInvalidValue);
  *pFlags = a->host_flags | cudaHostAllocMapped;
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  constexpr unsigned kKnown =
      cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (ptr == nullptr || size == 0 || (flags & ~kKnown) != 0) return recordError(cudaErrorInvalidValue);
  if (!AllocationTable::instance().registerHost(ptr, size, flags, Runtime::threadDevice()))
    return recordError(cudaErrorHostMemoryAlreadyRegistered);
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  if (ptr == nullptr) return recordError(cudaErrorInvalidValue);
  if (!AllocationTable::instance().unregisterHost(ptr)) return recordError(cudaErrorHostMemoryNotRegistered);
  return cudaSuccess;
}

}  // extern "C"
