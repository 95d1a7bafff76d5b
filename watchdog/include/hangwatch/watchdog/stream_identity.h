#pragma once
// Which stream an operation runs on, as the watchdog keys its per-stream queues. A
// stream created by the program is its handle. Stream 0 / cudaStreamLegacy is one
// stream per device, and cudaStreamPerThread one per device and host thread, so those
// get ids of their own: the legacy stream of device d is d << 8 (stream 0 of device 0
// stays 0x0), the per-thread stream sets bit 63, which no user-space pointer has.
#include <cuda_runtime_api.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace hangwatch::watchdog {

inline bool isPerDeviceStream(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

// The stream a per-thread-default-stream (_ptsz) entry point's work goes to: there,
// stream 0 is the calling thread's per-thread stream.
inline cudaStream_t perThreadDefault(cudaStream_t s) { return s == nullptr ? cudaStreamPerThread : s; }

inline uint32_t callingThreadId() {
  static thread_local uint32_t tid __attribute__((tls_model("initial-exec"))) = 0;
  if (__builtin_expect(tid == 0, 0)) tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
}

inline uint64_t streamIdentity(cudaStream_t s, int device) {
  const auto dev = static_cast<uint64_t>(device < 0 ? 0 : device) & 0xff;
  if (s == cudaStreamPerThread) return (uint64_t{1} << 63) | (uint64_t{callingThreadId()} << 8) | dev;
  if (s == nullptr || s == cudaStreamLegacy) return dev << 8;
  return reinterpret_cast<uint64_t>(s);
}

}  // namespace hangwatch::watchdog
