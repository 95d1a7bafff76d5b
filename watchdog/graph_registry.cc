#include "hangwatch/watchdog/graph_registry.h"

namespace hangwatch::watchdog {

void GraphRegistry::noteCaptured(uint64_t capture_id, const CapturedOp& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_.size() >= kMaxGraphs && capturing_.find(capture_id) == capturing_.end()) return;
  GraphContents& c = capturing_[capture_id];
  if (c.ops.size() < kMaxOpsPerGraph)
    c.ops.push_back(op);
  else
    ++c.dropped;
}

void GraphRegistry::captureEnded(uint64_t capture_id, cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = capturing_.find(capture_id);
  GraphContents contents = it != capturing_.end() ? std::move(it->second) : GraphContents{};
  if (it != capturing_.end()) capturing_.erase(it);
  if (graphs_.size() < kMaxGraphs) graphs_[graph] = std::move(contents);
}

void GraphRegistry::captureFailed(uint64_t capture_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_.erase(capture_id);
}

void GraphRegistry::instantiated(cudaGraph_t graph, cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = graphs_.find(graph);
  if (execs_.size() < kMaxGraphs) execs_[exec] = it != graphs_.end() ? it->second : GraphContents{};
}

std::optional<GraphContents> GraphRegistry::contentsOf(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return std::nullopt;
  return it->second;
}

void GraphRegistry::graphDestroyed(cudaGraph_t graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  graphs_.erase(graph);
}

void GraphRegistry::execDestroyed(cudaGraphExec_t exec) {
  std::lock_guard<std::mutex> lock(mutex_);
  execs_.erase(exec);
}

}  // namespace hangwatch::watchdog
