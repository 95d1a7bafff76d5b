#pragma once
// Who is slow: compares ranks with each other (robust statistics, analyzer/slowdown/
// README.md explains every threshold) and, given a saved healthy run, with that run.
// Each finding kind is one detector pass (detector.h), run in a fixed order.
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/slowdown/critical_path.h"
#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/slowdown/slowdown_finding.h"

namespace hangwatch::slowdown {

struct SlowdownThresholds {
  double spread_floor = 0.10;        // robust scale >= 10% of the median
  double outlier_z = 3.0;            // robust scales from the median to count as an outlier
  double slow_gpu_ratio = 0.85;      // and at most this fraction of the group's TFLOPS
  double issue_collapse_ratio = 0.25;  // issue latency p50 below this fraction of the group's
  double issue_w1_fraction = 0.5;    // and W1 to the others' distribution >= this x their p50
  int64_t issue_min_group_p50_ns = 20000;  // below 20 us there is no queue to collapse
  double sync_ratio = 2.0;           // and at least 2x (and 2 more) host synchronizations per step
  double gap_ratio = 1.4;            // idle between steps at least this multiple of the group's
  double gap_min_fraction = 0.05;    // and at least 5 points of the rank's time above it
  double late_step_ratio = 2.0;      // a step is late when its gap exceeds 2x the others' + 1 ms
  double dataloader_step_share = 0.5;  // late in this share of steps or more: every batch is late
  double void_min_fraction = 0.10;   // intra-step void: at least 10 points above the group
  double link_ratio = 0.6;           // communicator busbw below this x its peers'
  double baseline_link_ratio = 0.45;  // or below this x the baseline's: healthy simgpu runs on 2 shared cores differ by up to 40%
  double baseline_void_points = 0.10;
  // A network link is the bottleneck of its communicator when its data is on the wire
  // at least 3x as long, and 15 points of the time more, as the median of the
  // communicator's other links (healthy simgpu rings: within 2 points of each other).
  double link_wire_ratio = 3.0;
  double link_wire_points = 0.15;
  // Or its data moves, while on the wire, at most half as fast as the median of the
  // communicator's other links with steps of a like size (within 2x), over at least
  // 20 ms of wire time: a degraded link shows at its fraction even when the job's time
  // goes elsewhere (6 ranks on 2 loaded cores: 0.23 of the others for a link at 0.25).
  double link_rate_ratio = 0.5;
  int64_t link_rate_min_busy_ns = 20'000'000;
  double link_rate_step_bytes_ratio = 2.0;
  size_t min_ranks = 3;              // fewer ranks cannot say which one is odd
  // The critical path of every step the timelines hold (critical_path.h); off: the op-by-op
  // comparison alone, as before issue #45.
  bool critical_path = true;
};

struct SlowdownAnalysis {
  std::vector<SlowdownFinding> findings;
  // Per-rank and per-communicator figures (the measurements behind the findings).
  nlohmann::json metrics;
  std::vector<std::string> notes;  // what was skipped and why
  std::optional<CriticalPathAnalysis> critical_path;  // when the timelines gave common steps
};

// The critical path of the steps every rank's timeline holds (steps end at each rank's step
// anchor); nullopt, with a note, when there are none.
std::optional<CriticalPathAnalysis> criticalPathOf(const JobProfile& job, std::vector<std::string>& notes);

class SlowdownAnalyzer {
 public:
  explicit SlowdownAnalyzer(SlowdownThresholds t = {}) : t_(t) {}
  SlowdownAnalysis analyze(const JobProfile& job, const JobProfile* baseline = nullptr) const;

 private:
  SlowdownThresholds t_;
};

}  // namespace hangwatch::slowdown
