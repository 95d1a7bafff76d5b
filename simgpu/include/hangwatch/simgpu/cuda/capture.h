#pragma once
// Stream capture and CUDA graphs, with the rules of cuda_runtime_api.h (CUDA 13):
// work issued to a capturing stream is not run but recorded as a node of a graph,
// and every launch of the instantiated graph issues all its nodes again, in capture
// order, to the launch stream. The graph is kept linear (capture order): a valid
// order for any captured DAG, with less concurrency than a GPU would give it.
#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace simgpu {

class Stream;

// What a node does each time the graph holding it is launched on `stream`.
using NodeIssue = std::function<cudaError_t(cudaStream_t stream)>;

struct GraphNode {
  std::string name;
  NodeIssue issue;
};

struct Graph {  // cudaGraph_t
  std::vector<GraphNode> nodes;
};

struct GraphExec {  // cudaGraphExec_t: the nodes as they were at instantiation
  std::shared_ptr<const Graph> graph;
};

// One capture sequence, from cudaStreamBeginCapture on its origin stream to
// cudaStreamEndCapture; streams that wait on an event recorded in it join it.
class CaptureSequence {
 public:
  CaptureSequence(uint64_t id, cudaStreamCaptureMode mode, int device, const Stream* origin)
      : id_(id), mode_(mode), device_(device), origin_(origin), thread_(std::this_thread::get_id()) {}

  uint64_t id() const { return id_; }
  cudaStreamCaptureMode mode() const { return mode_; }
  int device() const { return device_; }
  const Stream* origin() const { return origin_; }
  std::thread::id thread() const { return thread_; }

  void add(GraphNode node);
  void invalidate() { invalidated_.store(true, std::memory_order_release); }
  bool invalidated() const { return invalidated_.load(std::memory_order_acquire); }
  bool ended() const { return ended_.load(std::memory_order_acquire); }

  // A stream joined by waiting on an event of this capture (a fork), and rejoined when
  // the origin waits on an event recorded in it; all must be rejoined at the end.
  void fork(Stream* stream);
  void rejoin(const Stream* stream);
  std::vector<Stream*> members();
  bool unjoined();

  // Ends the sequence: the graph captured so far, or nullptr once invalidated.
  std::shared_ptr<Graph> end();
  // The graph being captured into (cudaStreamGetCaptureInfo's graph_out).
  Graph* graph() { return graph_.get(); }

 private:
  const uint64_t id_;
  const cudaStreamCaptureMode mode_;
  const int device_;
  const Stream* origin_;
  const std::thread::id thread_;
  std::atomic<bool> invalidated_{false};
  std::atomic<bool> ended_{false};
  std::mutex mutex_;
  std::shared_ptr<Graph> graph_ = std::make_shared<Graph>();
  std::vector<Stream*> forked_;   // joined streams still to rejoin the origin
  std::vector<Stream*> members_;  // every stream in the sequence but the origin
};

}  // namespace simgpu
