// CUDA graphs: what a capture recorded is noted (graph_registry.h) as it becomes a
// graph and an executable, and every cudaGraphLaunch is timed as one operation that
// names its first collective. Each replay is a new execution of the captured
// collectives, so their communicators' sequence numbers advance at every launch, as
// they would have for the same collectives issued eagerly.
#include <cuda_runtime_api.h>

#include <cerrno>
#include <cstring>

#include "hangwatch/watchdog/monotonic_clock.h"
#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/real_api.h"
#include "hangwatch/watchdog/reentry_guard.h"
#include "hangwatch/watchdog/stream_identity.h"
#include "hangwatch/watchdog/watchdog.h"

using namespace hangwatch::watchdog;

namespace {

using EndCaptureFn = cudaError_t (*)(cudaStream_t, cudaGraph_t*);
using InstantiateFn = cudaError_t (*)(cudaGraphExec_t*, cudaGraph_t, unsigned long long);
using LaunchFn = cudaError_t (*)(cudaGraphExec_t, cudaStream_t);
NextSymbol<EndCaptureFn> next_end_capture{"cudaStreamEndCapture"};
NextSymbol<EndCaptureFn> next_end_capture_ptsz{"cudaStreamEndCapture_ptsz"};
NextSymbol<InstantiateFn> next_instantiate{"cudaGraphInstantiate"};
NextSymbol<InstantiateFn> next_instantiate_with_flags{"cudaGraphInstantiateWithFlags"};
NextSymbol<LaunchFn> next_graph_launch{"cudaGraphLaunch"};
NextSymbol<LaunchFn> next_graph_launch_ptsz{"cudaGraphLaunch_ptsz"};
NextSymbol<cudaError_t (*)(cudaGraphExec_t)> next_exec_destroy{"cudaGraphExecDestroy"};
NextSymbol<cudaError_t (*)(cudaGraph_t)> next_graph_destroy{"cudaGraphDestroy"};

// The capture sequence `stream` is capturing into, 0 when none.
uint64_t captureIdOf(cudaStream_t stream) {
  auto info = RealApi::instance().streamGetCaptureInfo.get();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (info == nullptr || info(stream, &status, &id, nullptr, nullptr, nullptr, nullptr) != cudaSuccess) {
    if (auto clear = RealApi::instance().getLastError.get()) clear();
    return 0;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : id;
}

// "cudaGraphLaunch: <first collective>" as a string that lives for the process.
const char* replayName(const char* collective) {
  static constexpr const char* kNames[][2] = {
      {"ncclAllReduce", "cudaGraphLaunch: ncclAllReduce"},     {"ncclAllGather", "cudaGraphLaunch: ncclAllGather"},
      {"ncclReduceScatter", "cudaGraphLaunch: ncclReduceScatter"}, {"ncclBroadcast", "cudaGraphLaunch: ncclBroadcast"},
      {"ncclBcast", "cudaGraphLaunch: ncclBcast"},             {"ncclReduce", "cudaGraphLaunch: ncclReduce"},
      {"ncclAlltoAll", "cudaGraphLaunch: ncclAlltoAll"},       {"ncclGather", "cudaGraphLaunch: ncclGather"},
      {"ncclScatter", "cudaGraphLaunch: ncclScatter"},         {"ncclSend", "cudaGraphLaunch: ncclSend"},
      {"ncclRecv", "cudaGraphLaunch: ncclRecv"}};
  for (const auto& n : kNames)
    if (collective != nullptr && std::strcmp(collective, n[0]) == 0) return n[1];
  return "cudaGraphLaunch";
}

template <typename Call>
cudaError_t endCapture(cudaStream_t stream, cudaGraph_t* graph, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  const int entry_errno = errno;
  const uint64_t id = captureIdOf(stream);
  errno = entry_errno;
  cudaError_t rc = call();
  const int saved = errno;
  if (id != 0) {
    if (rc == cudaSuccess && graph != nullptr && *graph != nullptr)
      w->graphs().captureEnded(id, *graph);
    else
      w->graphs().captureFailed(id);
  }
  errno = saved;
  return rc;
}

template <typename Call>
cudaError_t instantiate(cudaGraphExec_t* exec, cudaGraph_t graph, Call&& call) {
  cudaError_t rc = call();
  const int saved = errno;
  Watchdog* w = Watchdog::get();
  if (w != nullptr && rc == cudaSuccess && exec != nullptr) w->graphs().instantiated(graph, *exec);
  errno = saved;
  return rc;
}

// One replay: every captured collective takes its next seq; the first names the launch.
void advanceSeqs(Watchdog* w, const GraphContents& contents, PendingOp* op) {
  for (const CapturedOp& c : contents.ops) {
    if (!c.collective) continue;
    CommEntry* entry = w->comms().find(c.comm);
    if (entry == nullptr) continue;
    const uint64_t seq = entry->issued.fetch_add(1, std::memory_order_acq_rel);
    entry->recent.note(seq, c.name, c.count, c.dtype, -1);  // the root is not kept with a capture
    if (op->op.comm_hash != 0) continue;
    op->op.name = replayName(c.name);
    op->op.comm_hash = entry->hash;
    op->op.comm_size = entry->size.load(std::memory_order_relaxed);
    op->op.comm_rank = entry->rank.load(std::memory_order_relaxed);
    op->op.seq = seq;
    op->comm = c.comm;
    op->dtype = c.dtype;
    op->count = c.count;
  }
}

template <typename Call>
cudaError_t graphLaunch(cudaGraphExec_t exec, cudaStream_t stream, Call&& call) {
  Watchdog* w = Watchdog::get();
  if (w == nullptr || ReentryGuard::nested()) return call();
  std::optional<GraphContents> contents = w->graphs().contentsOf(exec);
  Watchdog::Timing t;
  const int64_t issued = monotonicNs();
  const int entry_errno = errno;
  const bool timed = w->beginTiming(stream, &t);
  errno = entry_errno;
  cudaError_t rc;
  {
    ReentryGuard guard;
    rc = call();
  }
  const int saved = errno;
  if (rc == cudaSuccess && t.capture_id != 0 && contents) {
    // Launched into another capture: its collectives become that graph's.
    for (const CapturedOp& c : contents->ops) w->graphs().noteCaptured(t.capture_id, c);
  } else if (rc == cudaSuccess) {
    PendingOp op;
    op.op.cls = OpClass::kGraph;
    op.op.name = "cudaGraphLaunch";
    op.op.host_issue_ns = issued;
    op.stream_handle = stream;
    if (contents) {
      advanceSeqs(w, *contents, &op);
      for (const CapturedOp& c : contents->ops) op.op.bytes += c.bytes;
    }
    if (timed) w->endTiming(t, stream, op);
  } else if (timed) {
    w->abandonTiming(t);
  }
  errno = saved;
  return rc;
}

}  // namespace

extern "C" {

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  auto real = next_end_capture.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return endCapture(stream, pGraph, [&] { return real(stream, pGraph); });
}

cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph) {
  auto real = next_end_capture_ptsz.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return endCapture(perThreadDefault(stream), pGraph, [&] { return real(stream, pGraph); });
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  auto real = next_instantiate.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return instantiate(pGraphExec, graph, [&] { return real(pGraphExec, graph, flags); });
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  auto real = next_instantiate_with_flags.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return instantiate(pGraphExec, graph, [&] { return real(pGraphExec, graph, flags); });
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  auto real = next_graph_launch.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return graphLaunch(graphExec, stream, [&] { return real(graphExec, stream); });
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  auto real = next_graph_launch_ptsz.get();
  if (real == nullptr) return cudaErrorNotSupported;
  return graphLaunch(graphExec, perThreadDefault(stream), [&] { return real(graphExec, stream); });
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  auto real = next_exec_destroy.get();
  if (real == nullptr) return cudaErrorNotSupported;
  cudaError_t rc = real(graphExec);
  const int saved = errno;
  if (Watchdog* w = Watchdog::active() ? Watchdog::get() : nullptr; w && rc == cudaSuccess) w->graphs().execDestroyed(graphExec);
  errno = saved;
  return rc;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  auto real = next_graph_destroy.get();
  if (real == nullptr) return cudaErrorNotSupported;
  cudaError_t rc = real(graph);
  const int saved = errno;
  if (Watchdog* w = Watchdog::active() ? Watchdog::get() : nullptr; w && rc == cudaSuccess) w->graphs().graphDestroyed(graph);
  errno = saved;
  return rc;
}

}  // extern "C"
