// Device management: the thread-local current device and the properties of an H100
// SXM5 (80 GB HBM3) in a DGX H100, what programs check before they start.
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
constexpr char kDeviceName[] = "NVIDIA H100 80GB HBM3";
constexpr unsigned kPciDeviceAndVendor = 0x233010DE;  // device 0x2330 (H100 SXM5), vendor 0x10DE (NVIDIA)

// PCI buses of the eight GPUs of a DGX H100, in device order; devices beyond eight
// continue from 0xE0.
constexpr int kPciBuses[] = {0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF};
int pciBus(int device) { return device < 8 ? kPciBuses[device] : 0xE0 + device - 8; }

// The H100 SXM5's answers; cudaGetDeviceProperties fills its fields from here too, so
// both ways of asking agree.
int computeAttribute(cudaDeviceAttr attr, int device) {
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return 1024;
    case cudaDevAttrMaxBlockDimX: return 1024;
    case cudaDevAttrMaxBlockDimY: return 1024;
    case cudaDevAttrMaxBlockDimZ: return 64;
    case cudaDevAttrMaxGridDimX: return 2147483647;
    case cudaDevAttrMaxGridDimY: return 65535;
    case cudaDevAttrMaxGridDimZ: return 65535;
    case cudaDevAttrMaxSharedMemoryPerBlock: return 48 * 1024;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return 227 * 1024;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return 228 * 1024;
    case cudaDevAttrReservedSharedMemoryPerBlock: return 1024;
    case cudaDevAttrTotalConstantMemory: return 64 * 1024;
    case cudaDevAttrWarpSize: return 32;
    case cudaDevAttrMaxPitch: return 2147483647;
    case cudaDevAttrMaxRegistersPerBlock: return 65536;
    case cudaDevAttrMaxRegistersPerMultiprocessor: return 65536;
    case cudaDevAttrMultiProcessorCount: return kMultiprocessors;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return 2048;
    case cudaDevAttrMaxBlocksPerMultiprocessor: return 32;
    case cudaDevAttrComputeCapabilityMajor: return 9;
    case cudaDevAttrComputeCapabilityMinor: return 0;
    case cudaDevAttrClockRate: return 1980000;
    case cudaDevAttrTextureAlignment: return 512;
    case cudaDevAttrTexturePitchAlignment: return 32;
    case cudaDevAttrSurfaceAlignment: return 512;
    default: return 0;
  }
}

int memoryAttribute(cudaDeviceAttr attr, int device) {
  switch (attr) {
    case cudaDevAttrMemoryClockRate: return 2619000;
    case cudaDevAttrGlobalMemoryBusWidth: return 5120;
    case cudaDevAttrL2CacheSize: return 50 * 1024 * 1024;
    case cudaDevAttrMaxPersistingL2CacheSize: return 50 * 1024 * 1024 / 4 * 3;  // 3/4 of L2, as the A100's
    case cudaDevAttrMaxAccessPolicyWindowSize: return 134213632;
    case cudaDevAttrCanMapHostMemory: return 1;
    case cudaDevAttrUnifiedAddressing: return 1;
    case cudaDevAttrManagedMemory: return 1;
    case cudaDevAttrConcurrentManagedAccess: return 1;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: return 1;
    case cudaDevAttrHostRegisterSupported: return 1;
    case cudaDevAttrHostRegisterReadOnlySupported: return 1;
    case cudaDevAttrMemoryPoolsSupported: return 1;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: return cudaMemHandleTypePosixFileDescriptor;
    case cudaDevAttrGPUDirectRDMASupported: return 1;
    case cudaDevAttrGlobalL1CacheSupported: return 1;
    case cudaDevAttrLocalL1CacheSupported: return 1;
    case cudaDevAttrEccEnabled: return 1;
    case cudaDevAttrNumaId: return -1;
    case cudaDevAttrHostNumaId: return device < 4 ? 0 : 1;  // two sockets, four GPUs each
    default: return 0;
  }
}

int systemAttribute(cudaDeviceAttr attr, int device) {
  switch (attr) {
    case cudaDevAttrPciBusId: return pciBus(device);
    case cudaDevAttrPciDeviceId: return 0;
    case cudaDevAttrPciDomainId: return 0;
    case cudaDevAttrMultiGpuBoardGroupID: return device;
    case cudaDevAttrConcurrentKernels: return 1;
    case cudaDevAttrAsyncEngineCount: return 2;
    case cudaDevAttrIntegrated: return 0;
    case cudaDevAttrCooperativeLaunch: return 1;
    case cudaDevAttrClusterLaunch: return 1;
    case cudaDevAttrComputePreemptionSupported: return 1;
    case cudaDevAttrStreamPrioritiesSupported: return 1;
    case cudaDevAttrIpcEventSupport: return 1;
    case cudaDevAttrSparseCudaArraySupported: return 1;
    case cudaDevAttrTimelineSemaphoreInteropSupported: return 1;
    case cudaDevAttrDeferredMappingCudaArraySupported: return 1;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions: return cudaFlushGPUDirectRDMAWritesOptionHost;
    case cudaDevAttrGPUDirectRDMAWritesOrdering: return cudaGPUDirectRDMAWritesOrderingOwner;
    default: return 0;
  }
}

int attributeValue(cudaDeviceAttr attr, int device) {
  return computeAttribute(attr, device) | memoryAttribute(attr, device) | systemAttribute(attr, device);
}

// An attribute the header's enum does not name is cudaErrorInvalidValue.
bool knownAttribute(cudaDeviceAttr attr) { return attr >= cudaDevAttrMaxThreadsPerBlock && attr < cudaDevAttrMax; }

void fillLimits(cudaDeviceProp* prop, int device) {
  auto a = [device](cudaDeviceAttr attr) { return attributeValue(attr, device); };
  prop->sharedMemPerBlock = a(cudaDevAttrMaxSharedMemoryPerBlock);
  prop->sharedMemPerBlockOptin = a(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  prop->sharedMemPerMultiprocessor = a(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  prop->reservedSharedMemPerBlock = a(cudaDevAttrReservedSharedMemoryPerBlock);
  prop->regsPerBlock = a(cudaDevAttrMaxRegistersPerBlock);
  prop->regsPerMultiprocessor = a(cudaDevAttrMaxRegistersPerMultiprocessor);
  prop->warpSize = a(cudaDevAttrWarpSize);
  prop->memPitch = a(cudaDevAttrMaxPitch);
  prop->maxThreadsPerBlock = a(cudaDevAttrMaxThreadsPerBlock);
  prop->maxThreadsDim[0] = a(cudaDevAttrMaxBlockDimX);
  prop->maxThreadsDim[1] = a(cudaDevAttrMaxBlockDimY);
  prop->maxThreadsDim[2] = a(cudaDevAttrMaxBlockDimZ);
  prop->maxGridSize[0] = a(cudaDevAttrMaxGridDimX);
  prop->maxGridSize[1] = a(cudaDevAttrMaxGridDimY);
  prop->maxGridSize[2] = a(cudaDevAttrMaxGridDimZ);
  prop->totalConstMem = a(cudaDevAttrTotalConstantMemory);
  prop->major = a(cudaDevAttrComputeCapabilityMajor);
  prop->minor = a(cudaDevAttrComputeCapabilityMinor);
  prop->textureAlignment = a(cudaDevAttrTextureAlignment);
  prop->texturePitchAlignment = a(cudaDevAttrTexturePitchAlignment);
  prop->surfaceAlignment = a(cudaDevAttrSurfaceAlignment);
  prop->multiProcessorCount = a(cudaDevAttrMultiProcessorCount);
  prop->maxThreadsPerMultiProcessor = a(cudaDevAttrMaxThreadsPerMultiProcessor);
  prop->maxBlocksPerMultiProcessor = a(cudaDevAttrMaxBlocksPerMultiprocessor);
  prop->memoryBusWidth = a(cudaDevAttrGlobalMemoryBusWidth);
  prop->l2CacheSize = a(cudaDevAttrL2CacheSize);
  prop->persistingL2CacheMaxSize = a(cudaDevAttrMaxPersistingL2CacheSize);
  prop->accessPolicyMaxWindowSize = a(cudaDevAttrMaxAccessPolicyWindowSize);
}

void fillCapabilities(cudaDeviceProp* prop, int device) {
  auto a = [device](cudaDeviceAttr attr) { return attributeValue(attr, device); };
  prop->canMapHostMemory = a(cudaDevAttrCanMapHostMemory);
  prop->unifiedAddressing = a(cudaDevAttrUnifiedAddressing);
  prop->managedMemory = a(cudaDevAttrManagedMemory);
  prop->concurrentManagedAccess = a(cudaDevAttrConcurrentManagedAccess);
  prop->canUseHostPointerForRegisteredMem = a(cudaDevAttrCanUseHostPointerForRegisteredMem);
  prop->hostRegisterSupported = a(cudaDevAttrHostRegisterSupported);
  prop->hostRegisterReadOnlySupported = a(cudaDevAttrHostRegisterReadOnlySupported);
  prop->memoryPoolsSupported = a(cudaDevAttrMemoryPoolsSupported);
  prop->memoryPoolSupportedHandleTypes = a(cudaDevAttrMemoryPoolSupportedHandleTypes);
  prop->gpuDirectRDMASupported = a(cudaDevAttrGPUDirectRDMASupported);
  prop->gpuDirectRDMAFlushWritesOptions = a(cudaDevAttrGPUDirectRDMAFlushWritesOptions);
  prop->gpuDirectRDMAWritesOrdering = a(cudaDevAttrGPUDirectRDMAWritesOrdering);
  prop->globalL1CacheSupported = a(cudaDevAttrGlobalL1CacheSupported);
  prop->localL1CacheSupported = a(cudaDevAttrLocalL1CacheSupported);
  prop->ECCEnabled = a(cudaDevAttrEccEnabled);
  prop->pciBusID = a(cudaDevAttrPciBusId);
  prop->pciDeviceID = a(cudaDevAttrPciDeviceId);
  prop->pciDomainID = a(cudaDevAttrPciDomainId);
  prop->multiGpuBoardGroupID = a(cudaDevAttrMultiGpuBoardGroupID);
  prop->concurrentKernels = a(cudaDevAttrConcurrentKernels);
  prop->asyncEngineCount = a(cudaDevAttrAsyncEngineCount);
  prop->cooperativeLaunch = a(cudaDevAttrCooperativeLaunch);
  prop->clusterLaunch = a(cudaDevAttrClusterLaunch);
  prop->computePreemptionSupported = a(cudaDevAttrComputePreemptionSupported);
  prop->streamPrioritiesSupported = a(cudaDevAttrStreamPrioritiesSupported);
  prop->ipcEventSupported = a(cudaDevAttrIpcEventSupport);
  prop->sparseCudaArraySupported = a(cudaDevAttrSparseCudaArraySupported);
  prop->timelineSemaphoreInteropSupported = a(cudaDevAttrTimelineSemaphoreInteropSupported);
  prop->deferredMappingCudaArraySupported = a(cudaDevAttrDeferredMappingCudaArraySupported);
  prop->unifiedFunctionPointers = 1;  // no attribute names it
  prop->deviceNumaId = a(cudaDevAttrNumaId);
  prop->hostNumaId = a(cudaDevAttrHostNumaId);
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
  Runtime::current().noteContextUse(device);
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
  std::strcpy(prop->name, kDeviceName);
  prop->uuid.bytes[0] = static_cast<char>(device);
  prop->uuid.bytes[15] = 0x51;
  prop->totalGlobalMem = simgpu::kDeviceMemoryBytes;
  fillLimits(prop, device);
  fillCapabilities(prop, device);
  prop->gpuPciDeviceID = kPciDeviceAndVendor;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return recordError(cudaErrorInvalidValue);
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  if (!knownAttribute(attr)) return recordError(cudaErrorInvalidValue);
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

// "domain:bus:device.function" in upper-case hex, as the runtime writes it (programs
// lower-case it to find the device under /sys/bus/pci/devices).
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (pciBusId == nullptr || len <= 0) return recordError(cudaErrorInvalidValue);
  if (!Runtime::current().validDevice(device)) return recordError(cudaErrorInvalidDevice);
  *fmt::format_to_n(pciBusId, static_cast<size_t>(len) - 1, "0000:{:02X}:00.0", pciBus(device)).out = '\0';
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* pciBusId) {
  if (device == nullptr || pciBusId == nullptr) return recordError(cudaErrorInvalidValue);
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4 || domain != 0 || dev != 0)
    return recordError(cudaErrorInvalidDevice);
  const int count = Runtime::current().deviceCount();
  for (int d = 0; d < count; ++d) {
    if (pciBus(d) != static_cast<int>(bus)) continue;
    *device = d;
    return cudaSuccess;
  }
  return recordError(cudaErrorInvalidDevice);
}

}  // extern "C"
