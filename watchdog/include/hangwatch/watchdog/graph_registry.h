#pragma once
// What each CUDA graph holds, learnt while it was captured, so that a replay can be
// timed as one operation that names its collectives. The watchdog never records or
// queries its own events inside a capture (querying an event recorded in a capture is
// cudaErrorCapturedEvent, and in global capture mode such calls can invalidate the
// user's capture): captured operations are only noted here, by capture sequence id.
// Bounded: at most kMaxOpsPerGraph operations per graph, kMaxGraphs graphs alive.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace hangwatch::watchdog {

// One collective or GEMM seen during a capture.
struct CapturedOp {
  const char* name = "";
  bool collective = false;  // takes a seq on its communicator at every replay
  uintptr_t comm = 0;       // ncclComm_t, 0 for a GEMM
  uint64_t bytes = 0;
  int32_t dtype = -1;
  uint64_t count = 0;
  int peer = -1;
};

// What a graph (and every executable instantiated from it) replays.
struct GraphContents {
  std::vector<CapturedOp> ops;
  uint64_t dropped = 0;  // operations beyond kMaxOpsPerGraph
};

class GraphRegistry {
 public:
  static constexpr size_t kMaxOpsPerGraph = 64;
  static constexpr size_t kMaxGraphs = 1024;

  void noteCaptured(uint64_t capture_id, const CapturedOp& op);
  // cudaStreamEndCapture made `graph` from capture `capture_id`.
  void captureEnded(uint64_t capture_id, cudaGraph_t graph);
  void captureFailed(uint64_t capture_id);
  void instantiated(cudaGraph_t graph, cudaGraphExec_t exec);
  std::optional<GraphContents> contentsOf(cudaGraphExec_t exec);
  void graphDestroyed(cudaGraph_t graph);
  void execDestroyed(cudaGraphExec_t exec);

 private:
  std::mutex mutex_;
  std::map<uint64_t, GraphContents> capturing_;
  std::map<cudaGraph_t, GraphContents> graphs_;
  std::map<cudaGraphExec_t, GraphContents> execs_;
};

}  // namespace hangwatch::watchdog
