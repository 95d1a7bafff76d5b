// Device management: the thread-local current device and properties of an emulated
// Hopper-class GPU whose name carries its configured throughput.
#include <cuda_runtime_api.h>

#include <cstring>

#include <fmt/format.h>

#include "hangwatch/simgpu/cuda/allocation_table.h"
#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/runtime.h"
#include "hangwatch/simgpu/config.h"

using simgpu::recordError;
using simgpu::Runtime;

namespace {

constexpr int kMultiprocessors = 132;

int attributeValue(cudaDeviceAttr attr, int device) {
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return 1024;
    case cudaDevAttrMaxBlockDimX: return 1024;
    case cudaDevAttrMaxBlockDimY: return 1024;
    case cudaDevAttrMaxBlockDimZ: return 64;
    case cudaDevAttrMaxGridDimX: return 2147483647;
    case cudaDevAttrMaxGridDimY: return 65535;
    case cudaDevAttrMaxGridDimZ: return 65535;
    case cudaDevAttrMaxSharedMemoryPerBlock: return 48 * 1024;
    case cudaDevAttrWarpSize: return 32;
    case cudaDevAttrMultiProcessorCount: return kMultiprocessors;
    case cudaDevAttrComputeCapabilityMajor: return 9;
    case cudaDevAttrComputeCapabilityMinor: return 0;
    case cudaDevAttrPciBusId: return device;
    case cudaDevAttrPciDeviceId: return 0;
    case cudaDevAttrPciDomainId: return 0;
    case cudaDevAttrConcurrentKernels: return 1;
    case cudaDevAttrUnifiedAddressing: return 1;
    case cudaDevAttrAsyncEngineCount: return 2;
    case cudaDevAttrL2CacheSize: return 50 * 1024 * 1024;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return 2048;
    case cudaDevAttrClockRate: return 1980000;
    case cudaDevAttrMemoryClockRate: return 2619000;
    case cudaDevAttrGlobalMemoryBusWidth: return 5120;
    case cudaDevAttrIntegrated: return 0;
    case cudaDevAttrCanMapHostMemory: return 1;
    case cudaDevAttrManagedMemory: return 1;
    case cudaDevAttrCooperativeLaunch: return 1;
    case cudaDevAttrStreamPrioritiesSupported: return 1;
    default: return 0;
  }
}

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return recordError(cudaErrorInvalidValue);
  *count = Runtime::current().deviceCount();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  Runtime::setThreadDevice(device);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return recordError(cudaErrorInvalidValue);
  *device = Runtime::threadDevice();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return recordError(cudaErrorInvalidValue);
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  fmt::format_to_n(prop->name, sizeof(prop->name) - 1, "simgpu {:g} TFLOPS", simgpu::simConfig().tflops);
  prop->uuid.bytes[0] = static_cast<char>(device);
  prop->uuid.bytes[15] = 0x51;
  prop->totalGlobalMem = simgpu::kDeviceMemoryBytes;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 64 * 1024;
  prop->major = 9;
  prop->minor = 0;
  prop->textureAlignment = 512;
  prop->multiProcessorCount = kMultiprocessors;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->pciBusID = device;
  prop->asyncEngineCount = 2;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = 5120;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->streamPrioritiesSupported = 1;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerMultiprocessor = 65536;
  prop->managedMemory = 1;
  prop->cooperativeLaunch = 1;
  prop->maxBlocksPerMultiProcessor = 32;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return recordError(cudaErrorInvalidValue);
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  *value = attributeValue(attr, device);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  Runtime& rt = Runtime::current();
  if (cudaError_t e = rt.checkUnsafeCall(); e != cudaSuccess) return recordError(e);
  rt.device(Runtime::threadDevice()).synchronize();
  return cudaSuccess;
}

cudaError_t cudaDeviceReset(void) {
  // Resources are not torn down: a sim kernel may still hold pointers into them.
  return cudaDeviceSynchronize();
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return recordError(cudaErrorInvalidValue);
  *driverVersion = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  if (runtimeVersion == nullptr) return recordError(cudaErrorInvalidValue);
  *runtimeVersion = 13000;
  return cudaSuccess;
}

// Peer access between the emulated devices: every pair can (they share host memory),
// and enabling or disabling follows the runtime's error rules.
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  if (canAccessPeer == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  if (!rt.validDevice(device) || !rt.validDevice(peerDevice)) return recordError(cudaErrorInvalidDevice);
  *canAccessPeer = device != peerDevice ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  if (flags != 0) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  const int device = Runtime::threadDevice();
  if (!rt.validDevice(peerDevice) || peerDevice == device) return recordError(cudaErrorInvalidDevice);
  if (!rt.setPeerAccess(device, peerDevice, true)) return recordError(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) {
  Runtime& rt = Runtime::current();
  const int device = Runtime::threadDevice();
  if (!rt.validDevice(peerDevice) || peerDevice == device) return recordError(cudaErrorInvalidDevice);
  if (!rt.setPeerAccess(device, peerDevice, false)) return recordError(cudaErrorPeerAccessNotEnabled);
  return cudaSuccess;
}

// "domain:bus:device.function"; the emulated device d sits on bus d.
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (pciBusId == nullptr || len <= 0) return recordError(cudaErrorInvalidValue);
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  *fmt::format_to_n(pciBusId, static_cast<size_t>(len) - 1, "0000:{:02x}:00.0", device).out = '\0';
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  if (device == nullptr || pciBusId == nullptr) return recordError(cudaErrorInvalidValue);
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4 || domain != 0 || dev != 0 ||
      !Runtime::current().validDevice(static_cast<int>(bus)))
    return recordError(cudaErrorInvalidDevice);
  *device = static_cast<int>(bus);
  return cudaSuccess;
}

}  // extern "C"
