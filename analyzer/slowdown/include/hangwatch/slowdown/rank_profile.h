#pragma once
// One rank's slowdown metrics over a whole run: the metrics windows summed (the first
// window, which holds start-up work, is left out when there are three or more), plus
// what only the per-op timeline shows (idle gap per step, GEMMs free of overlap).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/common/timeline_window.h"

namespace hangwatch::slowdown {

struct GemmShapeTotals {
  double flops = 0;
  int64_t ns = 0;
  uint64_t count = 0;
  double tflops() const { return ns > 0 ? flops / static_cast<double>(ns) / 1e3 : 0; }
};

struct CollectiveTotals {
  std::string comm;      // hex hash
  std::string name;      // ncclAllReduce ...
  uint64_t bytes = 0;    // API bytes
  int comm_size = 0;
  std::optional<int> comm_rank;
  uint64_t count = 0;
  int64_t ns = 0;
  // nccl-tests busbw from this rank's mean time; includes waiting for late ranks.
  std::optional<double> busbw_gbps() const;
};

// One connection this rank sends on over the network (NCCL profiler proxy steps).
struct LinkTotals {
  std::string nccl_comm;  // NCCL's communicator id: the same on every member
  int comm_size = 0;
  int comm_rank = 0;
  int peer = 0;           // the receiver's rank in the communicator
  uint64_t bytes = 0;
  uint64_t steps = 0;
  int64_t busy_ns = 0;    // time with data on the wire (union of steps' SendWait..done)
};

// One collective instance as the timeline saw it, for lining up across ranks.
struct CollectiveInstance {
  std::string comm;
  std::string name;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int comm_size = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// The collective whose completions end this rank's steps (the watchdog's step tracker,
// metrics windows' `step.key`: "<name> <comm> <bytes>").
struct StepAnchor {
  std::string name, comm;
  uint64_t bytes = 0;
  bool closes(const TimelineOp& o) const { return o.cls == "coll" && o.name == name && o.comm == comm && o.bytes == bytes; }
};

struct RankProfile {
  int rank = -1;
  std::string host;
  int windows = 0;            // windows used
  int bad_lines = 0;
  int64_t window_ns = 0;      // their total length
  std::map<std::string, GemmShapeTotals> gemms;  // by shape, from the metrics windows
  std::map<std::string, CollectiveTotals> collectives;  // by "name comm bytes"
  std::map<std::string, LinkTotals> links;  // by "nccl_comm comm_rank peer"
  LogHistogram issue_latency;  // compute and copies: gemm, kernel, memcpy
  int64_t busy_ns = 0;
  int64_t void_ns = 0;
  std::optional<int64_t> inter_step_void_ns;
  uint64_t sync_count = 0;
  int64_t sync_ns = 0;
  uint64_t steps = 0;
  int64_t step_ns = 0;
  std::vector<double> step_p50_ns;  // one per window with steps
  // From the timeline, when the rank wrote one.
  bool has_timeline = false;
  std::optional<StepAnchor> step_anchor;
  std::vector<int64_t> step_gaps_ns;  // the longest GPU idle gap of each step
  std::map<std::string, GemmShapeTotals> gemms_alone;  // GEMMs that overlap no communication op
  std::vector<CollectiveInstance> collective_instances;

  double voidFraction() const { return window_ns > 0 ? static_cast<double>(void_ns) / window_ns : 0; }
  double interStepVoidFraction() const;
  double syncsPerStep() const;
  double stepMs() const;
  // Per-shape TFLOPS, preferring GEMMs that ran alone (overlapping communication
  // kernels share the device, which is not the GPU's fault).
  std::map<std::string, GemmShapeTotals> gemmsForFlops() const;
};

// Folds one rank's windows into a profile. `timeline` may be null.
RankProfile profileRank(const MetricsFile& metrics, const TimelineWindow* timeline);

}  // namespace hangwatch::slowdown
