// CUDA runtime entry points: generic kernels (sampled), async copies (timed) and
// host synchronizations (counted and timed on the host for the metrics), in every
// flavour real programs call: nvcc's <<<>>> (__cudaLaunchKernel), per-thread-default-
// stream builds (_ptsz: stream 0 is the thread's stream) and the plain API.
#include <cuda_runtime_api.h>

#include <cerrno>

#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/stream_identity.h"
#include "hangwatch/watchdog/timed_call.h"
#include "hangwatch/watchdog/watchdog.h"

using namespace hangwatch::watchdog;

namespace {

NextSymbol<decltype(&cudaLaunchKernel)> next_launch{"cudaLaunchKernel"};
NextSymbol<decltype(&cudaLaunchKernelExC)> next_launch_ex{"cudaLaunchKernelExC"};
NextSymbol<decltype(&cudaMemcpyAsync)> next_memcpy_async{"cudaMemcpyAsync"};
NextSymbol<decltype(&cudaStreamSynchronize)> next_stream_sync{"cudaStreamSynchronize"};
NextSymbol<decltype(&cudaDeviceSynchronize)> next_device_sync{"cudaDeviceSynchronize"};
NextSymbol<decltype(&cudaEventSynchronize)> next_event_sync{"cudaEventSynchronize"};
NextSymbol<decltype(&cudaStreamWaitEvent)> next_stream_wait{"cudaStreamWaitEvent"};
NextSymbol<decltype(&cudaSetDevice)> next_set_device{"cudaSetDevice"};

using LaunchFn = cudaError_t (*)(const void*, dim3, dim3, void**, size_t, cudaStream_t);
using LaunchExFn = cudaError_t (*)(const cudaLaunchConfig_t*, const void*, void**);
using KernelLaunchFn = cudaError_t (*)(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
using MemcpyAsyncFn = cudaError_t (*)(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t);
using StreamSyncFn = cudaError_t (*)(cudaStream_t);
using StreamWaitFn = cudaError_t (*)(cudaStream_t, cudaEvent_t, unsigned);
NextSymbol<LaunchFn> next_launch_ptsz{"cudaLaunchKernel_ptsz"};
NextSymbol<LaunchExFn> next_launch_ex_ptsz{"cudaLaunchKernelExC_ptsz"};
NextSymbol<KernelLaunchFn> next_nvcc_launch{"__cudaLaunchKernel"};
NextSymbol<KernelLaunchFn> next_nvcc_launch_ptsz{"__cudaLaunchKernel_ptsz"};
NextSymbol<MemcpyAsyncFn> next_memcpy_async_ptsz{"cudaMemcpyAsync_ptsz"};
NextSymbol<StreamSyncFn> next_stream_sync_ptsz{"cudaStreamSynchronize_ptsz"};
NextSymbol<StreamWaitFn> next_stream_wait_ptsz{"cudaStreamWaitEvent_ptsz"};

template <typename Call>
cudaError_t launchKernel(cudaStream_t stream, const void* kernel, KernelHandle kind, const char* api, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || !w->sampleKernel() || ReentryGuard::nested()) return call();
  return timedCall(w, stream, cudaSuccess, call, [&](PendingOp& op) {
    op.op.cls = OpClass::kKernel;
    op.op.name = api;
    op.kernel_func = kernel;
    op.kernel_kind = kind;
  });
}

template <typename Call>
cudaError_t memcpyAsync(cudaStream_t stream, size_t count, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  return timedCall(w, stream, cudaSuccess, call, [&](PendingOp& op) {
    op.op.cls = OpClass::kMemcpy;
    op.op.name = "cudaMemcpyAsync";
    op.op.bytes = count;
  });
}

template <typename Call>
cudaError_t streamWait(Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  cudaError_t rc = call();
  const int saved = errno;
  // A device-side wait: no host time, but it is a synchronization point all the same.
  int64_t now = monotonicNs();
  w->recordHostSync(HostSync{"cudaStreamWaitEvent", now, now});
  errno = saved;
  return rc;
}

// No definition anywhere in the process: the caller could not have linked without
// this library, so there is no behaviour to keep; say so instead of crashing.
cudaError_t noDefinition() { return cudaErrorNotSupported; }

template <typename Call>
cudaError_t hostSync(const char* name, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  const int64_t start = monotonicNs();
  cudaError_t rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  w->recordHostSync(HostSync{name, start, monotonicNs()});
  errno = saved;
  return rc;
}

}  // namespace

extern "C" {

cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                             cudaStream_t stream) {
  auto real = next_launch.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return launchKernel(stream, func, KernelHandle::kFunction, "cudaLaunchKernel",
                      [&] { return real(func, grid, block, args, shared_mem, stream); });
}

cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                                  cudaStream_t stream) {
  auto real = next_launch_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return launchKernel(perThreadDefault(stream), func, KernelHandle::kFunction, "cudaLaunchKernel",
                      [&] { return real(func, grid, block, args, shared_mem, stream); });
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  auto real = next_launch_ex.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  if (config == nullptr) return real(config, func, args);
  return launchKernel(config->stream, func, KernelHandle::kFunction, "cudaLaunchKernelExC",
                      [&] { return real(config, func, args); });
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void** args) {
  auto real = next_launch_ex_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  if (config == nullptr) return real(config, func, args);
  return launchKernel(perThreadDefault(config->stream), func, KernelHandle::kFunction, "cudaLaunchKernelExC",
                      [&] { return real(config, func, args); });
}

// nvcc's <<<>>> since CUDA 12 (crt/host_runtime.h): a cudaKernel_t, not the host stub.
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared_mem,
                               cudaStream_t stream) {
  auto real = next_nvcc_launch.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return launchKernel(stream, kernel, KernelHandle::kKernel, "cudaLaunchKernel",
                      [&] { return real(kernel, grid, block, args, shared_mem, stream); });
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared_mem,
                                    cudaStream_t stream) {
  auto real = next_nvcc_launch_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return launchKernel(perThreadDefault(stream), kernel, KernelHandle::kKernel, "cudaLaunchKernel",
                      [&] { return real(kernel, grid, block, args, shared_mem, stream); });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  auto real = next_memcpy_async.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return memcpyAsync(stream, count, [&] { return real(dst, src, count, kind, stream); });
}

cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                 cudaStream_t stream) {
  auto real = next_memcpy_async_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return memcpyAsync(perThreadDefault(stream), count, [&] { return real(dst, src, count, kind, stream); });
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto real = next_stream_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return hostSync("cudaStreamSynchronize", [&] { return real(stream); });
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  auto real = next_stream_sync_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return hostSync("cudaStreamSynchronize", [&] { return real(stream); });
}

cudaError_t cudaDeviceSynchronize() {
  auto real = next_device_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return hostSync("cudaDeviceSynchronize", [&] { return real(); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto real = next_event_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return hostSync("cudaEventSynchronize", [&] { return real(event); });
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  auto real = next_stream_wait.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return streamWait([&] { return real(stream, event, flags); });
}

cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  auto real = next_stream_wait_ptsz.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  return streamWait([&] { return real(stream, event, flags); });
}

// A process that picks its GPU is a rank (torch.cuda.set_device, every launcher's recipe): the
// watchdog starts here, after the call, so a rank stuck before its first kernel or NCCL call
// (a communicator it never joins) still dumps when another rank triggers.
cudaError_t cudaSetDevice(int device) {
  auto real = next_set_device.get();
  if (__builtin_expect(real == nullptr, 0)) return noDefinition();
  cudaError_t rc = real(device);
  if (!ReentryGuard::nested()) Watchdog::startFromPassThrough();
  return rc;
}

}  // extern "C"
