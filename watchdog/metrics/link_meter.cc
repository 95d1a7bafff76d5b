#include "hangwatch/watchdog/metrics/link_meter.h"

#include <algorithm>

#include "hangwatch/watchdog/metrics/op_key_table.h"

namespace hangwatch::watchdog {

void LinkMeter::add(const LinkKey& key, uint64_t bytes, int64_t start_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = links_.find(key);
  if (it == links_.end()) {
    if (links_.size() >= kMaxLinks) {
      ++dropped_;
      return;
    }
    it = links_.emplace(key, Totals{}).first;
  }
  Totals& t = it->second;
  t.bytes += bytes;
  ++t.steps;
  if (end_ns > start_ns) {
    t.busy_ns += std::max<int64_t>(0, end_ns - std::max(start_ns, t.busy_until_ns));
    t.busy_until_ns = std::max(t.busy_until_ns, end_ns);
  }
}

std::vector<LinkWindowStats> LinkMeter::drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LinkWindowStats> out;
  for (auto it = links_.begin(); it != links_.end();) {
    Totals& t = it->second;
    if (t.steps == 0) {
      // Idle for a whole window: forget it, so the table holds only live connections.
      it = links_.erase(it);
      continue;
    }
    out.push_back(
        {hexId(it->first.comm_id), it->first.comm_size, it->first.comm_rank, it->first.peer, t.bytes, t.steps, t.busy_ns});
    t.bytes = 0;
    t.steps = 0;
    t.busy_ns = 0;
    ++it;
  }
  return out;
}

uint64_t LinkMeter::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

LinkMeter& linkMeter() {
  // Leaked on purpose: proxy threads may report steps during static destruction.
  static LinkMeter* meter = new LinkMeter;
  return *meter;
}

}  // namespace hangwatch::watchdog
