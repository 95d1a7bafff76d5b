#pragma once
// The critical path of each training step, from every rank's timeline (issue #45).
//
// A step's dependency graph: per stream, ops in order (an op starts when the one before it
// on its stream ends, or when its host issued it, whichever is later); across ranks, every
// collective instance joined by (communicator, sequence number), each send matched to its
// receive (k-th send from a to b in a step = k-th receive at b from a); within a rank, a
// host that issued late waited for what had ended last on its GPU. A communication op ends
// once its last member has started: the time before that is waiting, not its own.
//
// The walk goes backwards from the step's last end: at each op, what made it end when it did
// (the last member to arrive), and what made it start (its stream, its host). Its segments
// add up to the step. The slack of an op is how much later it could have ended without the
// step ending later (a reverse pass over the same graph). A slow step (against the job's own
// steps) is attributed to the rank and op kind whose time on the path grew most; a rank
// whose work grew off the path is reported as absorbed, never as the cause.
//
// Times are each rank's monotonic clock mapped to wall time through the clock pair in its
// file (ranks on several hosts rely on synchronized clocks, as the Chrome trace does).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/timeline_window.h"

namespace hangwatch::slowdown {

// One rank's input: its timeline and where its steps end (the end of the op that closes a
// step, with an id that is the same on every rank for the same step: the anchor
// collective's sequence number).
struct StepEnd {
  uint64_t id = 0;
  int64_t end_ns = 0;  // the rank's monotonic clock, as in its timeline
};

struct RankTimeline {
  const TimelineWindow* timeline = nullptr;
  std::vector<StepEnd> step_ends;  // oldest first
  std::optional<int> stage;        // pipeline stage, when the rank sends or receives point to point
};

struct PathSegment {
  int rank = -1;
  std::string stream;    // "" for host time
  std::string kind;      // gemm | coll | p2p | kernel | memcpy | host
  std::string op;        // API or kernel name; for host time, what the GPU waited for
  int64_t start_ns = 0;  // wall-clock ns since the epoch
  int64_t end_ns = 0;
  int ops = 1;  // consecutive ops of the same rank, kind and name, merged into one segment
};

struct StepPath {
  uint64_t id = 0;
  int64_t start_ns = 0;  // the previous step's end on the last rank to reach it (wall ns)
  int64_t end_ns = 0;
  std::vector<PathSegment> segments;  // oldest first
  std::map<int, int64_t> rank_ns;     // each rank's share of the path
  std::map<std::string, int64_t> kind_ns;
  // The least slack of each rank's ops in the step (ns): 0 on the path.
  std::map<int, int64_t> rank_min_slack_ns;
  double ms() const { return static_cast<double>(end_ns - start_ns) / 1e6; }
};

// What made a run of slow steps slow.
struct SlowStepCause {
  std::vector<uint64_t> steps;  // the slow steps it explains
  int rank = -1;                // -1: the stage is named, no one rank of it
  std::optional<int> stage;
  std::vector<int> ranks;    // the stage's ranks (or the rank)
  std::string kind;          // op kind whose time on the path grew most on that rank
  std::string op;            // its name
  double step_ms = 0;        // median of the slow steps
  double baseline_ms = 0;    // median of the other steps
  double extra_path_ms = 0;  // the stage's (rank's) own work's extra time on the path, median over the slow steps
  std::vector<std::string> evidence;
};

// A rank whose work grew where the schedule had room for it.
struct AbsorbedSlowdown {
  int rank = -1;
  std::optional<int> stage;
  std::string kind;
  std::vector<uint64_t> steps;  // the steps its work grew in
  double extra_ms = 0;          // its extra busy time per step (median)
  double slack_ms = 0;          // the most slack of its ops of that kind in those steps (median)
  std::vector<std::string> evidence;
};

struct CriticalPathThresholds {
  int64_t launch_gap_ns = 50'000;  // gaps below this between dependent ops are launch latency
  double slow_step_z = 3.0;        // a slow step: this many robust scales above the median
  double slow_step_ratio = 1.05;   // and at least this multiple of it
  double cause_share = 0.5;        // the cause's extra path time: at least this share of the step's
  size_t min_slow_steps = 3;       // a cause must explain this many slow steps, and half of them
                                   // (one or two are noise on a loaded host)
  double absorbed_min_ms = 1.5;    // busy time growth worth reporting as absorbed (beyond what
                                   // the median rank's grew in the same step)
  double absorbed_ratio = 1.01;    // and at least this multiple of the rank's usual busy time
                                   // (and 3 of its robust scales)
  size_t min_steps = 4;            // fewer common steps: no baseline to compare with
};

struct CriticalPathAnalysis {
  std::vector<StepPath> steps;  // common to every rank with a timeline, oldest first
  double baseline_step_ms = 0;
  std::optional<uint64_t> slowest_step;
  std::vector<SlowStepCause> causes;
  std::vector<AbsorbedSlowdown> absorbed;
  std::map<int, int> stages;  // pipeline stage of each rank that has one
  // The slack of every op of the analysed steps, by rank and index in its timeline's ops (-1:
  // in no analysed step). Not in the JSON (thousands per rank): the trace carries it per op.
  std::map<int, std::vector<int64_t>> op_slack_ns;
  std::vector<std::string> notes;
};

CriticalPathAnalysis analyzeCriticalPath(const std::map<int, RankTimeline>& ranks,
                                         const CriticalPathThresholds& t = {});

// DESIGN.md §5 `critical_path`: the steps' segments, each step's shares, the causes and
// what was absorbed.
nlohmann::json toJson(const CriticalPathAnalysis& a);

}  // namespace hangwatch::slowdown
