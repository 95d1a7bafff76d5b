// Per-device settings programs make or read as they start: device flags, the limits of
// cudaDeviceSetLimit, and the attributes of the link between two devices. Values and
// error rules as cuda_runtime_api.h documents them; the limits start at an H100's defaults.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>

#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/runtime.h"

using simgpu::recordError;
using simgpu::Runtime;

namespace {

constexpr int kMaxDevices = 64;
// cudaDeviceMapHost is implicit for the runtime (cudaSetDeviceFlags' documentation).
std::array<std::atomic<unsigned>, kMaxDevices> device_flags{};

bool validFlags(unsigned flags) {
  constexpr unsigned kKnown = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                              cudaDeviceSyncMemops;
  const unsigned schedule = flags & cudaDeviceScheduleMask;
  return (flags & ~kKnown) == 0 && (schedule == cudaDeviceScheduleAuto || schedule == cudaDeviceScheduleSpin ||
                                    schedule == cudaDeviceScheduleYield || schedule == cudaDeviceScheduleBlockingSync);
}

struct Limits {
  std::mutex mutex;
  size_t values[cudaLimitPersistingL2CacheSize + 1] = {
      1024,         // cudaLimitStackSize
      1 << 20,      // cudaLimitPrintfFifoSize
      8 << 20,      // cudaLimitMallocHeapSize
      2,            // cudaLimitDevRuntimeSyncDepth
      2048,         // cudaLimitDevRuntimePendingLaunchCount
      32,           // cudaLimitMaxL2FetchGranularity
      0,            // cudaLimitPersistingL2CacheSize
  };
};
Limits& limits() {
  static Limits* l = new Limits();
  return *l;
}

bool knownLimit(cudaLimit limit) { return limit >= cudaLimitStackSize && limit <= cudaLimitPersistingL2CacheSize; }

}  // namespace

extern "C" {

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  if (!validFlags(flags)) return recordError(cudaErrorInvalidValue);
  const int device = Runtime::threadDevice();
  if (device >= 0 && device < kMaxDevices) device_flags[device] = flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (flags == nullptr) return recordError(cudaErrorInvalidValue);
  const int device = Runtime::threadDevice();
  *flags = (device >= 0 && device < kMaxDevices ? device_flags[device].load() : 0u) | cudaDeviceMapHost;
  return cudaSuccess;
}

cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags) {
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  if (!validFlags(deviceFlags) || flags != 0) return recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* pValue, cudaLimit limit) {
  if (pValue == nullptr) return recordError(cudaErrorInvalidValue);
  if (!knownLimit(limit)) return recordError(cudaErrorUnsupportedLimit);
  std::lock_guard lock(limits().mutex);
  *pValue = limits().values[limit];
  return cudaSuccess;
}

// The documented ranges: the L2 fetch granularity is 0..128 bytes, the persisting L2
// cache at most the device's persisting maximum; the others take any size.
cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  if (!knownLimit(limit)) return recordError(cudaErrorUnsupportedLimit);
  if (limit == cudaLimitMaxL2FetchGranularity && value > 128) return recordError(cudaErrorInvalidValue);
  if (limit == cudaLimitPersistingL2CacheSize) {
    int max_persisting = 0;
    cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, Runtime::threadDevice());
    if (value > static_cast<size_t>(max_persisting)) return recordError(cudaErrorInvalidValue);
  }
  std::lock_guard lock(limits().mutex);
  limits().values[limit] = value;
  return cudaSuccess;
}

// Every pair of emulated devices is one NVLink/NVSwitch hop apart, as in a DGX H100.
cudaError_t cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int srcDevice, int dstDevice) {
  if (value == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  if (!rt.validDevice(srcDevice) || !rt.validDevice(dstDevice) || srcDevice == dstDevice)
    return recordError(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevP2PAttrPerformanceRank: *value = 0; return cudaSuccess;
    case cudaDevP2PAttrAccessSupported:
    case cudaDevP2PAttrNativeAtomicSupported:
    case cudaDevP2PAttrCudaArrayAccessSupported: *value = 1; return cudaSuccess;
    case cudaDevP2PAttrOnlyPartialNativeAtomicSupported: *value = 0; return cudaSuccess;
    default: return recordError(cudaErrorInvalidValue);
  }
}

}  // extern "C"
