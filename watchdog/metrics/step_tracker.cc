#include "hangwatch/watchdog/metrics/step_tracker.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "hangwatch/watchdog/metrics/op_key_table.h"

namespace hangwatch::watchdog {

std::optional<int64_t> StepTracker::observe(const CompletedOp& op) {
  // A graph replay that holds collectives marks steps as an eager collective does.
  if (markers_ || !(op.cls == OpClass::kCollective || (op.cls == OpClass::kGraph && op.comm_hash != 0)))
    return std::nullopt;
  std::string_view name = op.name ? op.name : "";
  bool same = name == anchor_name_ && op.comm_hash == anchor_comm_ && op.bytes == anchor_bytes_;
  if (!same) {
    bool better = anchor_name_.empty() || op.comm_size > anchor_size_ ||
                  (op.comm_size == anchor_size_ && op.bytes > anchor_bytes_);
    if (!better) return std::nullopt;
    // A new anchor restarts step timing: the previous anchor's period is not comparable.
    anchor_name_ = name;
    anchor_comm_ = op.comm_hash;
    anchor_size_ = op.comm_size;
    anchor_bytes_ = op.bytes;
    last_end_.reset();
    clearWindow();
  }
  addStep(op.gpu_end_ns);
  return op.gpu_end_ns;
}

int64_t StepTracker::markStep(int64_t end_ns) {
  if (!markers_) {
    markers_ = true;
    last_end_.reset();
    clearWindow();
  }
  addStep(end_ns);
  return end_ns;
}

void StepTracker::addStep(int64_t end_ns) {
  if (last_end_ && end_ns > *last_end_) {
    int64_t d = end_ns - *last_end_;
    ++count_;
    total_ns_ += d;
    max_ns_ = std::max(max_ns_, d);
    durations_.add(d);
  }
  if (!last_end_ || end_ns > *last_end_) last_end_ = end_ns;
}

std::optional<StepStats> StepTracker::windowStats() const {
  if (count_ == 0) return std::nullopt;
  StepStats s;
  s.source = markers_ ? "marker" : "anchor";
  if (!markers_) {
    s.anchor = fmt::format("{} {} {}", anchor_name_, hexId(anchor_comm_), anchor_bytes_);
  }
  s.count = count_;
  s.total_ns = total_ns_;
  s.p50_ns = durations_.percentileNs(0.5);
  s.max_ns = max_ns_;
  return s;
}

void StepTracker::clearWindow() {
  count_ = 0;
  total_ns_ = 0;
  max_ns_ = 0;
  durations_.clear();
}

}  // namespace hangwatch::watchdog
