// nvcc's registration and launch ABI (crt/host_runtime.h, crt/device_functions.h): each
// translation unit's constructor registers its fat binary, device functions and
// variables; `<<<>>>` pushes a call configuration that the host stub pops before it
// launches through __cudaLaunchKernel. simgpu cannot run the device code, so a
// registered function is launched as opaque device work (launch_api.cc).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "hangwatch/simgpu/cuda/device_symbols.h"
#include "hangwatch/simgpu/cuda/kernel_registry.h"

namespace {

// What __cudaRegisterFatBinary hands back: the handle the program passes to every later
// registration call of that module, until __cudaUnregisterFatBinary.
struct FatBinaryModule {
  void* fat_cubin = nullptr;
  bool initialized = false;
};

struct CallConfiguration {
  dim3 grid;
  dim3 block;
  size_t shared_mem;
  cudaStream_t stream;
};

// One stack per thread, as in the runtime: <<<>>> inside a kernel's argument list nests.
thread_local std::vector<CallConfiguration> call_configurations;

}  // namespace

extern "C" {

void** __cudaRegisterFatBinary(void* fatCubin) {
  auto* module = new FatBinaryModule{fatCubin};
  return reinterpret_cast<void**>(module);
}

void __cudaRegisterFatBinaryEnd(void** fatCubinHandle) {
  if (fatCubinHandle != nullptr) reinterpret_cast<FatBinaryModule*>(fatCubinHandle)->initialized = true;
}

void __cudaUnregisterFatBinary(void** fatCubinHandle) {
  if (fatCubinHandle == nullptr) return;
  simgpu::KernelRegistry::instance().removeModule(fatCubinHandle);
  simgpu::DeviceSymbols::instance().removeModule(fatCubinHandle);
  delete reinterpret_cast<FatBinaryModule*>(fatCubinHandle);  // the registries keep it only as a key
}

void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun, const char* deviceName,
                            int thread_limit, uint3* tid, uint3* bid, dim3* bDim, dim3* gDim, int* wSize) {
  if (hostFun == nullptr) return;
  const char* name = deviceName != nullptr ? deviceName : deviceFun;
  simgpu::KernelInfo info{name != nullptr ? name : "", {}, simgpu::KernelBody::kOpaqueDevice, fatCubinHandle};
  simgpu::KernelRegistry::instance().add(hostFun, std::move(info));
}

// A __device__ or __constant__ variable: simgpu's device memory is host memory, so the
// host shadow the program already has is the variable's device storage too.
void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress, const char* deviceName, int ext,
                       size_t size, int constant, int global) {
  if (hostVar == nullptr) return;
  simgpu::DeviceSymbols::instance().add(hostVar, {hostVar, size, fatCubinHandle});
}

// A __managed__ variable: nvcc makes the host's `m` a pointer (*hostVarPtrAddress) that
// the runtime points at managed storage, and host code uses `*m`, so the symbol a program
// passes to cudaGetSymbolAddress is the storage. simgpu cannot read the variable's initial
// value from the cubin: it starts zeroed.
void __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress, char* deviceAddress,
                              const char* deviceName, int ext, size_t size, int constant, int global) {
  if (hostVarPtrAddress == nullptr) return;
  void* storage = nullptr;
  if (cudaMallocManaged(&storage, size == 0 ? 1 : size, cudaMemAttachGlobal) != cudaSuccess) return;
  std::memset(storage, 0, size);
  *hostVarPtrAddress = storage;
  simgpu::DeviceSymbols::instance().add(storage, {storage, size, fatCubinHandle});
}

char __cudaInitModule(void** fatCubinHandle) { return fatCubinHandle != nullptr ? 1 : 0; }

// Texture and surface references were removed from the CUDA 12 API; the registration
// calls remain for old objects and are accepted with nothing to bind.
void __cudaRegisterTexture(void** fatCubinHandle, const struct textureReference* hostVar, const void** deviceAddress,
                           const char* deviceName, int dim, int norm, int ext) {}

void __cudaRegisterSurface(void** fatCubinHandle, const struct surfaceReference* hostVar, const void** deviceAddress,
                           const char* deviceName, int dim, int ext) {}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st* stream) {
  call_configurations.push_back({gridDim, blockDim, sharedMem, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream) {
  if (call_configurations.empty()) return cudaErrorMissingConfiguration;
  CallConfiguration c = call_configurations.back();
  call_configurations.pop_back();
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shared_mem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

}  // extern "C"
