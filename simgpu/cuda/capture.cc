#include "hangwatch/simgpu/cuda/capture.h"

#include <algorithm>

namespace simgpu {

void CaptureSequence::add(GraphNode node) {
  std::lock_guard lock(mutex_);
  graph_->nodes.push_back(std::move(node));
}

void CaptureSequence::fork(Stream* stream) {
  std::lock_guard lock(mutex_);
  if (std::find(members_.begin(), members_.end(), stream) == members_.end()) members_.push_back(stream);
  if (std::find(forked_.begin(), forked_.end(), stream) == forked_.end()) forked_.push_back(stream);
}

void CaptureSequence::rejoin(const Stream* stream) {
  std::lock_guard lock(mutex_);
  std::erase(forked_, stream);
}

std::vector<Stream*> CaptureSequence::members() {
  std::lock_guard lock(mutex_);
  return members_;
}

bool CaptureSequence::unjoined() {
  std::lock_guard lock(mutex_);
  return !forked_.empty();
}

std::shared_ptr<Graph> CaptureSequence::end() {
  ended_.store(true, std::memory_order_release);
  std::lock_guard lock(mutex_);
  if (invalidated()) return nullptr;
  return graph_;
}

}  // namespace simgpu
