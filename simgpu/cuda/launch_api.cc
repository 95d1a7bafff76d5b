// Kernel launches: a sim kernel is a registered host function `void(void**)` run on
// the stream's worker. Argument values are copied at launch, as real CUDA does, so
// the caller may change its variables right after the launch returns. An nvcc function
// (fatbin_api.cc) is opaque work of its modeled duration (opaque_kernel.h).
#include <cuda.h>
#include <dlfcn.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hangwatch/simgpu/cuda/kernel_registry.h"
#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/opaque_kernel.h"
#include "hangwatch/simgpu/cuda/per_thread_stream.h"
#include "hangwatch/simgpu/cuda/runtime.h"
#include "hangwatch/simgpu/kernel.h"
#include "hangwatch/simgpu/runtime.h"

using simgpu::recordError;
using simgpu::Runtime;

namespace {

using KernelEntry = void (*)(void**);

// The launch's copy of the argument values, each at a 16-byte aligned offset.
struct ArgumentPack {
  std::vector<size_t> offsets;
  std::unique_ptr<unsigned char[]> bytes;

  ArgumentPack(const std::vector<size_t>& sizes, void** args) {
    size_t total = 0;
    for (size_t size : sizes) {
      offsets.push_back(total);
      total += (size + 15) / 16 * 16;
    }
    bytes = std::make_unique<unsigned char[]>(total == 0 ? 1 : total);
    for (size_t i = 0; i < sizes.size(); ++i) std::memcpy(bytes.get() + offsets[i], args[i], sizes[i]);
  }

  std::vector<void*> pointers() {
    std::vector<void*> p;
    for (size_t offset : offsets) p.push_back(bytes.get() + offset);
    return p;
  }
};

bool validDim(dim3 d) { return d.x > 0 && d.y > 0 && d.z > 0; }

// Runtime and driver launches share this; only the runtime records the error as the
// thread's last error (driver calls leave it alone).
cudaError_t launch(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem, cudaStream_t stream) {
  std::optional<simgpu::KernelInfo> kernel = simgpu::KernelRegistry::instance().find(func);
  if (!kernel) return cudaErrorInvalidDeviceFunction;
  if (!validDim(grid) || !validDim(block) || block.x * block.y * block.z > 1024) return cudaErrorInvalidConfiguration;
  if (!kernel->arg_sizes.empty() && args == nullptr) return cudaErrorInvalidValue;
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Stream> s = rt.resolveStream(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  if (kernel->body == simgpu::KernelBody::kOpaqueDevice) {
    const std::chrono::nanoseconds modeled = simgpu::opaque_kernel::launchTime(grid, block, shared_mem);
    simgpu::DeviceWork work = [modeled] { simgpu::occupyDevice(modeled); };
    return rt.submit(*s, simgpu::StreamTask{std::move(kernel->name), std::move(work), {}});
  }
  auto pack = std::make_shared<ArgumentPack>(kernel->arg_sizes, args);
  auto entry = reinterpret_cast<KernelEntry>(const_cast<void*>(func));
  simgpu::DeviceWork work = [pack, entry] {
    auto start = std::chrono::steady_clock::now();
    std::vector<void*> pointers = pack->pointers();
    entry(pointers.data());
    simgpu::occupyDeviceSince(start);  // a slow-rank device runs it slower
  };
  return rt.submit(*s, simgpu::StreamTask{std::move(kernel->name), std::move(work), {}});
}

// A sim CUfunction / cudaKernel_t is the registered host function itself.
const void* kernelEntry(const void* handle) { return handle; }

CUresult driverResult(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_HANDLE;
  }
}

// The driver's stream handles: CU_STREAM_LEGACY / CU_STREAM_PER_THREAD are the runtime's
// cudaStreamLegacy / cudaStreamPerThread; 0 depends on the entry point's flavour.
cudaStream_t driverStream(CUstream s, bool per_thread) {
  auto stream = reinterpret_cast<cudaStream_t>(s);
  return per_thread ? simgpu::perThreadDefault(stream) : stream;
}

CUresult launchDriver(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared_mem, CUstream stream, void** params, void** extra, bool per_thread) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // packed argument buffers are not modeled
  return driverResult(launch(kernelEntry(f), dim3(gx, gy, gz), dim3(bx, by, bz), params, shared_mem,
                             driverStream(stream, per_thread)));
}

CUresult CUDAAPI simLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared_mem, CUstream stream, void** params, void** extra) {
  return launchDriver(f, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra, false);
}

CUresult CUDAAPI simLaunchKernelPtsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned shared_mem, CUstream stream, void** params, void** extra) {
  return launchDriver(f, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra, true);
}

CUresult launchDriverEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool per_thread) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launchDriver(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                      c->sharedMemBytes, c->hStream, params, extra, per_thread);
}

CUresult CUDAAPI simLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launchDriverEx(c, f, params, extra, false);
}

CUresult CUDAAPI simLaunchKernelExPtsz(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launchDriverEx(c, f, params, extra, true);
}

// cuFuncGetName / cuKernelGetName: a sim CUfunction or CUkernel is the registered function.
CUresult CUDAAPI simFuncGetName(const char** name, const void* f) {
  if (name == nullptr || f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* registered = simgpu::KernelRegistry::instance().name(f);
  if (registered == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *name = registered;
  return CUDA_SUCCESS;
}

// The driver entry points simgpu models, reached as real programs reach them: through
// cudaGetDriverEntryPoint (libcuda itself is not emulated).
struct DriverEntry {
  const char* name;
  void* legacy;
  void* per_thread;
};
const DriverEntry kDriverEntries[] = {
    {"cuLaunchKernel", reinterpret_cast<void*>(&simLaunchKernel), reinterpret_cast<void*>(&simLaunchKernelPtsz)},
    {"cuLaunchKernelEx", reinterpret_cast<void*>(&simLaunchKernelEx), reinterpret_cast<void*>(&simLaunchKernelExPtsz)},
    {"cuFuncGetName", reinterpret_cast<void*>(&simFuncGetName), reinterpret_cast<void*>(&simFuncGetName)},
    {"cuKernelGetName", reinterpret_cast<void*>(&simFuncGetName), reinterpret_cast<void*>(&simFuncGetName)},
};

// A driver function the runtime does not model itself comes from simgpu's libcuda.so.1, as the
// real runtime asks the driver it loaded: the one the process has, or else the one beside this
// library (the drop-in folder). The real driver (which has no simgpuDriverProcAddress) is never
// asked, nor loaded.
using DriverProcAddressFn = void* (*)(const char* name, int cuda_version, bool per_thread);

DriverProcAddressFn simgpuDriver() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver == nullptr) {
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&simgpuDriver), &self) != 0 && self.dli_fname != nullptr) {
      std::string beside = self.dli_fname;
      beside = beside.substr(0, beside.rfind('/') + 1) + "libcuda.so.1";
      driver = dlopen(beside.c_str(), RTLD_LAZY | RTLD_LOCAL);
    }
  }
  return driver == nullptr ? nullptr : reinterpret_cast<DriverProcAddressFn>(dlsym(driver, "simgpuDriverProcAddress"));
}

void* driverLibraryEntry(const char* symbol, unsigned version, bool per_thread) {
  static DriverProcAddressFn lookup = simgpuDriver();
  return lookup == nullptr ? nullptr : lookup(symbol, static_cast<int>(version), per_thread);
}

// cudaEnableDefault means per-thread in the _ptsz flavour of the query, legacy otherwise.
cudaError_t driverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                             cudaDriverEntryPointQueryResult* status, bool ptsz_query, unsigned version = 13000) {
  constexpr unsigned long long kKnown = cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream;
  if (symbol == nullptr || fn == nullptr || (flags & ~kKnown) != 0) return recordError(cudaErrorInvalidValue);
  const bool per_thread = (flags & cudaEnablePerThreadDefaultStream) != 0 ||
                          (ptsz_query && (flags & cudaEnableLegacyStream) == 0);
  *fn = simgpu::runtimeDriverEntry(symbol, per_thread);
  if (*fn == nullptr) *fn = driverLibraryEntry(symbol, version, per_thread);
  if (status != nullptr) *status = *fn != nullptr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // namespace

void* simgpu::runtimeDriverEntry(const char* name, bool per_thread) {
  for (const DriverEntry& e : kDriverEntries)
    if (std::strcmp(e.name, name) == 0) return per_thread ? e.per_thread : e.legacy;
  return nullptr;
}

extern "C" {

cudaError_t simgpuRegisterKernel(const void* entry, int nargs, const size_t* arg_sizes, const char* name) {
  if (entry == nullptr || nargs < 0 || (nargs > 0 && arg_sizes == nullptr)) return recordError(cudaErrorInvalidValue);
  simgpu::KernelInfo info{name != nullptr ? name : "simgpu_kernel", std::vector<size_t>(arg_sizes, arg_sizes + nargs)};
  simgpu::KernelRegistry::instance().add(entry, std::move(info));
  return cudaSuccess;
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (name == nullptr || func == nullptr) return recordError(cudaErrorInvalidValue);
  const char* registered = simgpu::KernelRegistry::instance().name(func);
  if (registered == nullptr) return recordError(cudaErrorInvalidDeviceFunction);
  *name = registered;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream) {
  return recordError(launch(func, gridDim, blockDim, args, sharedMem, stream));
}

cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                  cudaStream_t stream) {
  return recordError(launch(func, gridDim, blockDim, args, sharedMem, simgpu::perThreadDefault(stream)));
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (config == nullptr) return recordError(cudaErrorInvalidValue);
  return recordError(launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes, config->stream));
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void** args) {
  if (config == nullptr) return recordError(cudaErrorInvalidValue);
  return recordError(launch(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                            simgpu::perThreadDefault(config->stream)));
}

// What nvcc's <<<>>> compiles to since CUDA 12: a cudaKernel_t from __cudaGetKernel,
// launched by __cudaLaunchKernel (__cudaLaunchKernel_ptsz in per-thread builds).
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* func) {
  if (kernel == nullptr) return recordError(cudaErrorInvalidValue);
  if (!simgpu::KernelRegistry::instance().find(func)) return recordError(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(func));
  return cudaSuccess;
}

cudaError_t cudaGetKernel(cudaKernel_t* kernel, const void* func) { return __cudaGetKernel(kernel, func); }

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                               cudaStream_t stream) {
  return recordError(launch(kernelEntry(kernel), gridDim, blockDim, args, sharedMem, stream));
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                    cudaStream_t stream) {
  return recordError(launch(kernelEntry(kernel), gridDim, blockDim, args, sharedMem, simgpu::perThreadDefault(stream)));
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t* function, const void* func) {
  if (function == nullptr) return recordError(cudaErrorInvalidValue);
  if (!simgpu::KernelRegistry::instance().find(func)) return recordError(cudaErrorInvalidDeviceFunction);
  *function = reinterpret_cast<cudaFunction_t>(const_cast<void*>(func));
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  return driverEntryPoint(symbol, funcPtr, flags, driverStatus, false);
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
  return driverEntryPoint(symbol, funcPtr, flags, driverStatus, true);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* driverStatus) {
  return driverEntryPoint(symbol, funcPtr, flags, driverStatus, false, cudaVersion);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
  return driverEntryPoint(symbol, funcPtr, flags, driverStatus, true, cudaVersion);
}

}  // extern "C"
