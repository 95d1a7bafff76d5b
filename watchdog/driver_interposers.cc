// Kernel launches through the CUDA driver API. Triton, CUTLASS and cuBLASLt do not call
// cuLaunchKernel[Ex] through the PLT: they ask cudaGetDriverEntryPoint[ByVersion] or
// cuGetProcAddress for a pointer. Those queries are interposed and the launch pointers
// they hand out replaced by wrappers that sample and time the launch like
// cudaLaunchKernel; a program linked to libcuda is caught at the PLT as well.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>

#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/stream_identity.h"
#include "hangwatch/watchdog/timed_call.h"
#include "hangwatch/watchdog/watchdog.h"

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the driver still exports the
// old 4-argument cuGetProcAddress as well, and both are interposed.
#undef cuGetProcAddress

using namespace hangwatch::watchdog;

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using EntryPointFn = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
using EntryPointByVersionFn = cudaError_t (*)(const char*, void**, unsigned, unsigned long long,
                                              cudaDriverEntryPointQueryResult*);
using ProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using ProcAddressV1Fn = CUresult (*)(const char*, void**, int, cuuint64_t);

NextSymbol<EntryPointFn> next_entry_point{"cudaGetDriverEntryPoint"};
NextSymbol<EntryPointFn> next_entry_point_ptsz{"cudaGetDriverEntryPoint_ptsz"};
NextSymbol<EntryPointByVersionFn> next_entry_point_by_version{"cudaGetDriverEntryPointByVersion"};
NextSymbol<EntryPointByVersionFn> next_entry_point_by_version_ptsz{"cudaGetDriverEntryPointByVersion_ptsz"};
NextSymbol<ProcAddressFn> next_proc_address{"cuGetProcAddress_v2"};
NextSymbol<ProcAddressV1Fn> next_proc_address_v1{"cuGetProcAddress"};
NextSymbol<LaunchFn> next_cu_launch{"cuLaunchKernel"};
NextSymbol<LaunchFn> next_cu_launch_ptsz{"cuLaunchKernel_ptsz"};
NextSymbol<LaunchExFn> next_cu_launch_ex{"cuLaunchKernelEx"};
NextSymbol<LaunchExFn> next_cu_launch_ex_ptsz{"cuLaunchKernelEx_ptsz"};

// The driver's pointers handed out by a query, per flavour: [0] legacy stream, [1] per-thread.
std::atomic<LaunchFn> handed_launch[2];
std::atomic<LaunchExFn> handed_launch_ex[2];

// The stream the launch's work goes to: CU_STREAM_LEGACY / CU_STREAM_PER_THREAD are the
// runtime's special handles, and 0 means the per-thread stream in the _ptsz flavour.
cudaStream_t launchStream(CUstream s, bool per_thread) {
  auto stream = reinterpret_cast<cudaStream_t>(s);
  return per_thread ? perThreadDefault(stream) : stream;
}

template <typename Call>
CUresult timedLaunch(cudaStream_t stream, CUfunction f, const char* api, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || !w->sampleKernel() || ReentryGuard::nested()) return call();
  return timedCall(w, stream, CUDA_SUCCESS, call, [&](PendingOp& op) {
    op.op.cls = OpClass::kKernel;
    op.op.name = api;
    op.kernel_func = f;
    op.kernel_kind = KernelHandle::kDriverFunction;
  });
}

template <bool kPerThread>
CUresult launchThroughEntryPoint(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  LaunchFn real = handed_launch[kPerThread].load(std::memory_order_acquire);
  return timedLaunch(launchStream(s, kPerThread), f, "cuLaunchKernel",
                     [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra); });
}

template <bool kPerThread>
CUresult launchExThroughEntryPoint(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  LaunchExFn real = handed_launch_ex[kPerThread].load(std::memory_order_acquire);
  if (config == nullptr) return real(config, f, params, extra);
  return timedLaunch(launchStream(config->hStream, kPerThread), f, "cuLaunchKernelEx",
                     [&] { return real(config, f, params, extra); });
}

// Replaces a launch pointer the driver handed out by the wrapper of its flavour. A
// pointer that already is one of ours (a query answered twice on its way) stays.
void substitute(const char* symbol, void** fn, bool per_thread) {
  if (symbol == nullptr || fn == nullptr || *fn == nullptr || Watchdog::get() == nullptr) return;
  void* wrappers[] = {reinterpret_cast<void*>(&launchThroughEntryPoint<false>),
                      reinterpret_cast<void*>(&launchThroughEntryPoint<true>),
                      reinterpret_cast<void*>(&launchExThroughEntryPoint<false>),
                      reinterpret_cast<void*>(&launchExThroughEntryPoint<true>)};
  for (void* w : wrappers)
    if (*fn == w) return;
  const size_t pt = per_thread ? 1 : 0;
  if (std::strcmp(symbol, "cuLaunchKernel") == 0) {
    handed_launch[pt].store(reinterpret_cast<LaunchFn>(*fn), std::memory_order_release);
    *fn = wrappers[pt];
  } else if (std::strcmp(symbol, "cuLaunchKernelEx") == 0) {
    handed_launch_ex[pt].store(reinterpret_cast<LaunchExFn>(*fn), std::memory_order_release);
    *fn = wrappers[2 + pt];
  }
}

// cudaEnableDefault is the per-thread flavour in the _ptsz query (what a per-thread
// build calls), the legacy one otherwise (cuda_runtime_api.h, cudaGetDriverEntryPoint).
bool runtimeQueryIsPerThread(unsigned long long flags, bool ptsz_query) {
  if (flags & cudaEnablePerThreadDefaultStream) return true;
  if (flags & cudaEnableLegacyStream) return false;
  return ptsz_query;
}

// cuGetProcAddress: a per-thread build's inline wrapper sets the flag itself (cuda.h),
// so the default is the legacy flavour.
bool driverQueryIsPerThread(cuuint64_t flags) { return (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0; }

template <typename Call>
cudaError_t runtimeQuery(const char* symbol, void** fn, bool per_thread, Call&& call) {
  cudaError_t rc;
  {
    ReentryGuard guard;  // the runtime may ask the driver through an interposed cuGetProcAddress
    rc = call();
  }
  const int saved = errno;
  if (rc == cudaSuccess && !ReentryGuard::nested()) substitute(symbol, fn, per_thread);
  errno = saved;
  return rc;
}

template <typename Call>
CUresult driverQuery(const char* symbol, void** fn, bool per_thread, Call&& call) {
  CUresult rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  if (rc == CUDA_SUCCESS && !ReentryGuard::nested()) substitute(symbol, fn, per_thread);
  errno = saved;
  return rc;
}

}  // namespace

extern "C" {

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = next_entry_point.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return runtimeQuery(symbol, funcPtr, runtimeQueryIsPerThread(flags, false),
                      [&] { return real(symbol, funcPtr, flags, driverStatus); });
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = next_entry_point_ptsz.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return runtimeQuery(symbol, funcPtr, runtimeQueryIsPerThread(flags, true),
                      [&] { return real(symbol, funcPtr, flags, driverStatus); });
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                             unsigned long long flags, cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = next_entry_point_by_version.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return runtimeQuery(symbol, funcPtr, runtimeQueryIsPerThread(flags, false),
                      [&] { return real(symbol, funcPtr, cudaVersion, flags, driverStatus); });
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = next_entry_point_by_version_ptsz.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return runtimeQuery(symbol, funcPtr, runtimeQueryIsPerThread(flags, true),
                      [&] { return real(symbol, funcPtr, cudaVersion, flags, driverStatus); });
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  auto real = next_proc_address.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return driverQuery(symbol, pfn, driverQueryIsPerThread(flags),
                     [&] { return real(symbol, pfn, cudaVersion, flags, symbolStatus); });
}

// The CUDA 11.3-12.4 signature, still exported by the driver for old binaries.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  auto real = next_proc_address_v1.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return driverQuery(symbol, pfn, driverQueryIsPerThread(flags),
                     [&] { return real(symbol, pfn, cudaVersion, flags); });
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** params, void** extra) {
  auto real = next_cu_launch.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return timedLaunch(launchStream(s, false), f, "cuLaunchKernel",
                     [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra); });
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  auto real = next_cu_launch_ptsz.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return timedLaunch(launchStream(s, true), f, "cuLaunchKernel",
                     [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra); });
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  auto real = next_cu_launch_ex.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (config == nullptr) return real(config, f, params, extra);
  return timedLaunch(launchStream(config->hStream, false), f, "cuLaunchKernelEx",
                     [&] { return real(config, f, params, extra); });
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  auto real = next_cu_launch_ex_ptsz.get();
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (config == nullptr) return real(config, f, params, extra);
  return timedLaunch(launchStream(config->hStream, true), f, "cuLaunchKernelEx",
                     [&] { return real(config, f, params, extra); });
}

}  // extern "C"
