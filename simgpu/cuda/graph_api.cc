// Stream capture and graph launch entry points (capture.h), with the error rules of the
// CUDA 13 runtime API header: cudaStreamBeginCapture, cudaStreamEndCapture,
// cudaStreamIsCapturing, cudaStreamGetCaptureInfo, cudaThreadExchangeStreamCaptureMode,
// cudaGraphInstantiate[WithFlags], cudaGraphUpload, cudaGraphLaunch and the destroys.
#include <cuda_runtime_api.h>

#include "hangwatch/simgpu/cuda/capture.h"
#include "hangwatch/simgpu/cuda/last_error.h"
#include "hangwatch/simgpu/cuda/per_thread_stream.h"
#include "hangwatch/simgpu/cuda/runtime.h"
#include "hangwatch/simgpu/runtime.h"

using simgpu::CaptureSequence;
using simgpu::recordError;
using simgpu::Runtime;
using simgpu::Stream;

namespace {

bool validMode(cudaStreamCaptureMode mode) {
  return mode == cudaStreamCaptureModeGlobal || mode == cudaStreamCaptureModeThreadLocal ||
         mode == cudaStreamCaptureModeRelaxed;
}

// Issues every node of `exec` to `stream`, in capture order.
cudaError_t launchGraph(const simgpu::GraphExec& exec, cudaStream_t stream) {
  for (const simgpu::GraphNode& node : exec.graph->nodes)
    if (cudaError_t e = node.issue(stream); e != cudaSuccess) return e;
  return cudaSuccess;
}

// The legacy stream beside a capturing blocking stream of its device ("The blocking
// stream capture is not invalidated" by asking).
cudaError_t implicitCaptureOf(Stream& stream) {
  if (stream.kind() != Stream::Kind::kLegacyDefault) return cudaSuccess;
  return Runtime::current().checkStreamUse(stream, false);
}

}  // namespace

namespace simgpu {

bool isCapturing(cudaStream_t stream) {
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(stream);
  return s && s->capture() != nullptr;
}

cudaError_t captureNode(cudaStream_t stream, const char* name, std::function<cudaError_t(cudaStream_t)> issue) {
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(stream);
  if (!s) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<CaptureSequence> c = s->capture();
  if (!c) return cudaErrorIllegalState;
  if (c->invalidated()) return cudaErrorStreamCaptureInvalidated;
  c->add(GraphNode{name != nullptr ? name : "simgpu_node", std::move(issue)});
  return cudaSuccess;
}

}  // namespace simgpu

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!validMode(mode)) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  // "Capture may not be initiated if stream is cudaStreamLegacy."
  if (s->kind() == Stream::Kind::kLegacyDefault) return recordError(cudaErrorStreamCaptureUnsupported);
  if (s->capture()) return recordError(cudaErrorIllegalState);  // "only ... if the stream is not already in capture mode"
  rt.beginCapture(*s, mode);
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph) {
  if (pGraph == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  std::shared_ptr<CaptureSequence> c = s->capture();
  if (!c) return recordError(cudaErrorIllegalState);
  if (c->origin() != s.get()) return recordError(cudaErrorStreamCaptureUnmatched);
  if (c->mode() != cudaStreamCaptureModeRelaxed && c->thread() != std::this_thread::get_id())
    return recordError(cudaErrorStreamCaptureWrongThread);
  const bool unjoined = c->unjoined();
  std::shared_ptr<simgpu::Graph> graph = c->end();
  s->setCapture(nullptr);
  for (Stream* member : c->members()) member->setCapture(nullptr);
  *pGraph = nullptr;
  if (!graph) return recordError(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return recordError(cudaErrorStreamCaptureUnjoined);
  *pGraph = rt.addGraph(std::move(graph));
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  if (pCaptureStatus == nullptr) return recordError(cudaErrorInvalidValue);
  std::shared_ptr<Stream> s = Runtime::current().resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = implicitCaptureOf(*s); e != cudaSuccess) return recordError(e);
  std::shared_ptr<CaptureSequence> c = s->capture();
  *pCaptureStatus = !c ? cudaStreamCaptureStatusNone
                       : c->invalidated() ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* id_out, cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out, const cudaGraphEdgeData** edgeData_out,
                                     size_t* numDependencies_out) {
  if (captureStatus_out == nullptr || (edgeData_out != nullptr && dependencies_out == nullptr))
    return recordError(cudaErrorInvalidValue);
  if (cudaError_t e = cudaStreamIsCapturing(stream, captureStatus_out); e != cudaSuccess) return e;
  if (*captureStatus_out != cudaStreamCaptureStatusActive) return cudaSuccess;
  std::shared_ptr<CaptureSequence> c = Runtime::current().resolveStream(stream)->capture();
  if (id_out != nullptr) *id_out = c->id();
  // The graph is not a graph API object here: an opaque handle for the sequence.
  if (graph_out != nullptr) *graph_out = reinterpret_cast<cudaGraph_t>(c->graph());
  if (dependencies_out != nullptr) *dependencies_out = nullptr;  // the linear graph's last node is implicit
  if (edgeData_out != nullptr) *edgeData_out = nullptr;
  if (numDependencies_out != nullptr) *numDependencies_out = 0;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr || !validMode(*mode)) return recordError(cudaErrorInvalidValue);
  std::swap(*mode, Runtime::threadCaptureMode());
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  if (pGraphExec == nullptr) return recordError(cudaErrorInvalidValue);
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::Graph> g = rt.resolveGraph(graph);
  if (!g) return recordError(cudaErrorInvalidValue);
  // A copy: later changes to the graph do not reach instantiated executables.
  auto exec = std::make_shared<simgpu::GraphExec>();
  exec->graph = std::make_shared<const simgpu::Graph>(*g);
  *pGraphExec = rt.addGraphExec(std::move(exec));
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  constexpr unsigned long long kKnown = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
                                        cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
  if ((flags & ~kKnown) != 0) return recordError(cudaErrorInvalidValue);
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream) {
  Runtime& rt = Runtime::current();
  if (!rt.resolveGraphExec(graphExec)) return recordError(cudaErrorInvalidResourceHandle);
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  return cudaSuccess;  // nothing to upload: simgpu's device memory is host memory
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  Runtime& rt = Runtime::current();
  std::shared_ptr<simgpu::GraphExec> exec = rt.resolveGraphExec(graphExec);
  if (!exec) return recordError(cudaErrorInvalidResourceHandle);
  std::shared_ptr<Stream> s = rt.resolveStream(stream);
  if (!s) return recordError(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = rt.checkStreamUse(*s); e != cudaSuccess) return recordError(e);
  // Launched into a capture: the whole graph becomes one node of the capturing graph.
  if (std::shared_ptr<CaptureSequence> c = s->capture()) {
    c->add(simgpu::GraphNode{"cudaGraphLaunch", [exec](cudaStream_t launch) { return launchGraph(*exec, launch); }});
    return cudaSuccess;
  }
  return recordError(launchGraph(*exec, stream));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  if (!Runtime::current().destroyGraphExec(graphExec)) return recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!Runtime::current().destroyGraph(graph)) return recordError(cudaErrorInvalidValue);
  return cudaSuccess;
}

// Per-thread-default-stream builds: stream 0 is the thread's stream.
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return cudaStreamBeginCapture(simgpu::perThreadDefault(stream), mode);
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* pGraph) {
  return cudaStreamEndCapture(simgpu::perThreadDefault(stream), pGraph);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus) {
  return cudaStreamIsCapturing(simgpu::perThreadDefault(stream), pCaptureStatus);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* captureStatus_out,
                                          unsigned long long* id_out, cudaGraph_t* graph_out,
                                          const cudaGraphNode_t** dependencies_out,
                                          const cudaGraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  return cudaStreamGetCaptureInfo(simgpu::perThreadDefault(stream), captureStatus_out, id_out, graph_out,
                                  dependencies_out, edgeData_out, numDependencies_out);
}
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return cudaGraphLaunch(graphExec, simgpu::perThreadDefault(stream));
}
cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return cudaGraphUpload(graphExec, simgpu::perThreadDefault(stream));
}

}  // extern "C"
