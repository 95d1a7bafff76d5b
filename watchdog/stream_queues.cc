#include "hangwatch/watchdog/stream_queues.h"

#include <algorithm>

namespace hangwatch::watchdog {

void StreamQueues::push(const PendingOp& op) {
  auto& q = streams_[op.op.stream];
  q.push_back(op);
  if (q.size() == 1) q.front().front_since_ns = op.op.host_issue_ns;
}

PendingOp* StreamQueues::front(uint64_t stream) {
  auto it = streams_.find(stream);
  return it == streams_.end() || it->second.empty() ? nullptr : &it->second.front();
}

void StreamQueues::popFront(uint64_t stream, int64_t now_ns) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.empty()) return;
  it->second.pop_front();
  if (it->second.empty()) {
    streams_.erase(it);  // streams come and go; keep memory bounded by what is pending
    return;
  }
  PendingOp& next = it->second.front();
  next.front_since_ns = std::max(next.op.host_issue_ns, now_ns);
}

size_t StreamQueues::pendingCount() const {
  size_t n = 0;
  for (const auto& [stream, q] : streams_) n += q.size();
  return n;
}

}  // namespace hangwatch::watchdog
