// The CUDA driver API subset that runtime users reach directly (PyTorch's cuBLAS handle
// setup, device guards, its lazily opened NVRTC and driver tables): simgpu's libcuda.so.1
// (simgpu/dropin). It answers from the emulated runtime it is linked to: the same devices,
// the runtime's primary contexts, its launches. Every other export of the real driver is a
// generated stub that says it is not emulated (dropin/unsupported_stubs.py).
//
// Model: the driver counts as initialized (the runtime initializes it in a real process, and
// this library only exists beside simgpu's runtime); cuInit checks its flags. Each device has
// one primary context, active once the runtime used the device or cuDevicePrimaryCtxRetain
// holds it. A thread's current context is the primary context of the runtime's current device
// when that one is active, as the runtime leaves it current, or the one the thread set or
// pushed. Making a primary context current makes its device the runtime's current device, as
// cudaGetDevice then reports, and a later cudaSetDevice moves the thread along, as the runtime
// does.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hangwatch/simgpu/runtime.h"

// A registered log callback; simgpu's driver has nothing to log, so none is ever called.
struct CUlogsCallbackEntry_st {
  CUlogsCallback callback = nullptr;
  void* data = nullptr;
};

struct CUctx_st {
  int device = 0;
  std::atomic<unsigned> flags{0};
  std::atomic<int> retains{0};
};

namespace {

constexpr int kDriverVersion = 13000;

std::vector<CUctx_st>& primaryContexts() {
  // Never freed: a stream worker or an atexit handler may still ask at exit.
  static std::vector<CUctx_st>* contexts = [] {
    int count = 0;
    cudaGetDeviceCount(&count);
    auto* v = new std::vector<CUctx_st>(static_cast<size_t>(count));
    for (int d = 0; d < count; ++d) (*v)[d].device = d;
    return v;
  }();
  return *contexts;
}

bool validDevice(CUdevice dev) { return dev >= 0 && dev < static_cast<int>(primaryContexts().size()); }

CUctx_st* primary(CUdevice dev) { return &primaryContexts()[dev]; }

bool active(CUdevice dev) { return primary(dev)->retains.load() > 0 || simgpu::primaryContextActive(dev); }

bool knownContext(CUcontext ctx) {
  auto& all = primaryContexts();
  return ctx >= all.data() && ctx < all.data() + all.size();
}

// Every context is a primary context, so a thread's current context is the primary context of
// the runtime's current device, or none: how it was made current is all a thread keeps, and
// what cuCtxPushCurrent saves.
enum class Binding { kRuntime, kSet, kNone };

struct ThreadContext {
  Binding binding = Binding::kRuntime;
  std::vector<std::pair<Binding, int>> saved;
};

thread_local ThreadContext t_context;

CUcontext currentContext() {
  int device = simgpu::currentDevice();
  switch (t_context.binding) {
    case Binding::kNone: return nullptr;
    case Binding::kSet: return primary(device);
    case Binding::kRuntime: break;
  }
  return validDevice(device) && active(device) ? primary(device) : nullptr;
}

void makeCurrent(CUcontext ctx) {
  t_context.binding = ctx == nullptr ? Binding::kNone : Binding::kSet;
  if (ctx != nullptr) cudaSetDevice(ctx->device);
}

CUresult fromRuntime(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return CUDA_SUCCESS;
    case cudaErrorInvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorInvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorMemoryAllocation: return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidResourceHandle: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidConfiguration: return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorNotReady: return CUDA_ERROR_NOT_READY;
    case cudaErrorNotSupported: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_UNKNOWN;
  }
}

struct ResultText {
  CUresult code;
  const char* name;
  const char* description;
};

// The driver's names, and its strings (the runtime's for the same condition).
constexpr ResultText kResults[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ResultText* lookupResult(CUresult code) {
  for (const ResultText& r : kResults)
    if (r.code == code) return &r;
  return nullptr;
}

// This library's own handle, for looking up its exports (the generated stubs among them)
// without the process's interposers.
void* selfHandle() {
  static void* handle = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&selfHandle), &info) == 0 || info.dli_fname == nullptr) return RTLD_DEFAULT;
    void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    return h != nullptr ? h : RTLD_DEFAULT;
  }();
  return handle;
}

// What cuGetProcAddress gives for a driver function: the runtime's launch entry points,
// else this library's newest export of the name for the default-stream mode asked for
// (name_v3, name_v2, name; with _ptsz first for the per-thread default stream).
void* procAddress(const char* symbol, bool per_thread) {
  if (void* fn = simgpu::runtimeDriverEntry(symbol, per_thread)) return fn;
  const std::string base = symbol;
  for (const char* version : {"_v3", "_v2", ""}) {
    for (const char* stream_mode : {per_thread ? "_ptsz" : "", ""}) {
      if (void* fn = dlsym(selfHandle(), (base + version + stream_mode).c_str())) return fn;
    }
  }
  return nullptr;
}

template <typename Fn>
Fn runtimeEntry(const char* name, bool per_thread) {
  return reinterpret_cast<Fn>(simgpu::runtimeDriverEntry(name, per_thread));
}

CUresult getProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  constexpr cuuint64_t kKnown = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  *pfn = procAddress(symbol, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
  if (*pfn == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

// The runtime's way in (cuda/launch_api.cc driverLibraryEntry): its name tells simgpu's
// driver from the real one.
__attribute__((visibility("default"))) void* simgpuDriverProcAddress(const char* name, int cuda_version,
                                                                     bool per_thread) {
  return name == nullptr ? nullptr : procAddress(name, per_thread);
}

CUresult CUDAAPI cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(primaryContexts().size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, dev); e != cudaSuccess) return fromRuntime(e);
  std::snprintf(name, static_cast<size_t>(len), "%s", prop.name);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, dev); e != cudaSuccess) return fromRuntime(e);
  *bytes = prop.totalGlobalMem;
  return CUDA_SUCCESS;
}

// The driver's attribute numbers are the runtime's (cudaDeviceAttr mirrors CUdevice_attribute).
CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return fromRuntime(cudaDeviceGetAttribute(pi, static_cast<cudaDeviceAttr>(attrib), dev));
}

CUresult CUDAAPI cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (cudaError_t e = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev); e != cudaSuccess)
    return fromRuntime(e);
  return fromRuntime(cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, dev));
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, dev); e != cudaSuccess) return fromRuntime(e);
  static_assert(sizeof(uuid->bytes) == sizeof(prop.uuid.bytes));
  std::memcpy(uuid->bytes, prop.uuid.bytes, sizeof(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return fromRuntime(cudaDeviceGetPCIBusId(pciBusId, len, dev));
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fromRuntime(cudaDeviceGetByPCIBusId(dev, pciBusId));
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev) || !validDevice(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  return fromRuntime(cudaDeviceCanAccessPeer(canAccessPeer, dev, peerDev));
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  primary(dev)->retains.fetch_add(1);
  *pctx = primary(dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  int retains = primary(dev)->retains.load();
  while (retains > 0 && !primary(dev)->retains.compare_exchange_weak(retains, retains - 1)) {
  }
  return retains > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* is_active) {
  if (flags == nullptr || is_active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = primary(dev)->flags.load();
  *is_active = active(dev) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  constexpr unsigned kKnown = CU_CTX_SCHED_MASK | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_COREDUMP_ENABLE |
                              CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  primary(dev)->flags.store(flags);
  return CUDA_SUCCESS;
}

// Resources are not torn down (the runtime's cudaDeviceReset does the same): the device's
// work is waited for and the flags go back to their default.
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  primary(dev)->flags.store(0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = currentContext();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (ctx != nullptr && !knownContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  makeCurrent(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  if (ctx == nullptr || !knownContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  t_context.saved.emplace_back(t_context.binding, simgpu::currentDevice());
  makeCurrent(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  CUcontext top = currentContext();
  if (top == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = top;
  if (t_context.saved.empty()) {
    t_context.binding = Binding::kNone;
    return CUDA_SUCCESS;
  }
  auto [binding, device] = t_context.saved.back();
  t_context.saved.pop_back();
  t_context.binding = binding;
  cudaSetDevice(device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = currentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = currentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *flags = ctx->flags.load();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) ctx = currentContext();
  if (ctx == nullptr || !knownContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;  // what every context made since CUDA 3.2 reports
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  CUcontext ctx = currentContext();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return fromRuntime(cudaDeviceSynchronize());
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ResultText* r = lookupResult(error);
  *pStr = r != nullptr ? r->name : nullptr;
  return r != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ResultText* r = lookupResult(error);
  *pStr = r != nullptr ? r->description : nullptr;
  return r != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) {
  return getProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

// The driver still exports the 4-argument original that cuda.h renames away.
#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return getProcAddress(symbol, pfn, cudaVersion, flags, nullptr);
}

CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void* userData,
                                        CUlogsCallbackHandle* callback_out) {
  if (callbackFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* entry = new CUlogsCallbackEntry_st{callbackFunc, userData};
  if (callback_out != nullptr) *callback_out = entry;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback) {
  if (callback == nullptr) return CUDA_ERROR_INVALID_VALUE;
  delete callback;
  return CUDA_SUCCESS;
}

// The launch and naming entry points are the runtime's (they launch on its streams).
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  static auto fn = runtimeEntry<decltype(&cuLaunchKernel)>("cuLaunchKernel", false);
  return fn(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams,
            extra);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  static auto fn = runtimeEntry<decltype(&cuLaunchKernel_ptsz)>("cuLaunchKernel", true);
  return fn(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams,
            extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  static auto fn = runtimeEntry<decltype(&cuLaunchKernelEx)>("cuLaunchKernelEx", false);
  return fn(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                       void** extra) {
  static auto fn = runtimeEntry<decltype(&cuLaunchKernelEx_ptsz)>("cuLaunchKernelEx", true);
  return fn(config, f, kernelParams, extra);
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  static auto fn = runtimeEntry<decltype(&cuFuncGetName)>("cuFuncGetName", false);
  return fn(name, hfunc);
}

CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  static auto fn = runtimeEntry<decltype(&cuKernelGetName)>("cuKernelGetName", false);
  return fn(name, hfunc);
}

}  // extern "C"
