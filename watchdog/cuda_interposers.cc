// CUDA runtime entry points: generic kernels (sampled), async copies (timed) and
// host synchronizations (counted and timed on the host for the metrics).
#include <cuda_runtime_api.h>

#include <cerrno>

#include "monotonic_clock.h"
#include "next_symbol.h"
#include "reentry_guard.h"
#include "watchdog.h"

using namespace hangwatch::watchdog;

namespace {

NextSymbol<decltype(&cudaLaunchKernel)> next_launch{"cudaLaunchKernel"};
NextSymbol<decltype(&cudaLaunchKernelExC)> next_launch_ex{"cudaLaunchKernelExC"};
NextSymbol<decltype(&cudaMemcpyAsync)> next_memcpy_async{"cudaMemcpyAsync"};
NextSymbol<decltype(&cudaStreamSynchronize)> next_stream_sync{"cudaStreamSynchronize"};
NextSymbol<decltype(&cudaDeviceSynchronize)> next_device_sync{"cudaDeviceSynchronize"};
NextSymbol<decltype(&cudaEventSynchronize)> next_event_sync{"cudaEventSynchronize"};
NextSymbol<decltype(&cudaStreamWaitEvent)> next_stream_wait{"cudaStreamWaitEvent"};

// Runs `call` with timing events around it on `stream`; `fill` completes the record.
template <typename Call, typename Fill>
cudaError_t timed(Watchdog* w, cudaStream_t stream, Call&& call, Fill&& fill) {
  Watchdog::Timing t;
  const int64_t issued = monotonicNs();
  if (!w->beginTiming(stream, &t)) return call();
  cudaError_t rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  if (rc == cudaSuccess) {
    PendingOp op;
    op.op.host_issue_ns = issued;
    fill(op);
    w->endTiming(t, stream, op);
  } else {
    w->abandonTiming(t);
  }
  errno = saved;
  return rc;
}

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
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  Watchdog* w = Watchdog::get();
  if (w == nullptr || !w->sampleKernel() || ReentryGuard::nested())
    return real(func, grid, block, args, shared_mem, stream);
  return timed(w, stream, [&] { return real(func, grid, block, args, shared_mem, stream); }, [&](PendingOp& op) {
    op.op.cls = OpClass::kKernel;
    op.op.name = "cudaLaunchKernel";
    op.kernel_func = func;
  });
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  auto real = next_launch_ex.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  Watchdog* w = Watchdog::get();
  if (w == nullptr || config == nullptr || !w->sampleKernel() || ReentryGuard::nested())
    return real(config, func, args);
  return timed(w, config->stream, [&] { return real(config, func, args); }, [&](PendingOp& op) {
    op.op.cls = OpClass::kKernel;
    op.op.name = "cudaLaunchKernelExC";
    op.kernel_func = func;
  });
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  auto real = next_memcpy_async.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(dst, src, count, kind, stream);
  return timed(w, stream, [&] { return real(dst, src, count, kind, stream); }, [&](PendingOp& op) {
    op.op.cls = OpClass::kMemcpy;
    op.op.name = "cudaMemcpyAsync";
    op.op.bytes = count;
  });
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  auto real = next_stream_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  return hostSync("cudaStreamSynchronize", [&] { return real(stream); });
}

cudaError_t cudaDeviceSynchronize() {
  auto real = next_device_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  return hostSync("cudaDeviceSynchronize", [&] { return real(); });
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto real = next_event_sync.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  return hostSync("cudaEventSynchronize", [&] { return real(event); });
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  auto real = next_stream_wait.get();
  if (__builtin_expect(real == nullptr, 0)) return cudaErrorNotSupported;
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return real(stream, event, flags);
  cudaError_t rc = real(stream, event, flags);
  const int saved = errno;
  // A device-side wait: no host time, but it is a synchronization point all the same.
  int64_t now = monotonicNs();
  w->recordHostSync(HostSync{"cudaStreamWaitEvent", now, now});
  errno = saved;
  return rc;
}

}  // extern "C"
