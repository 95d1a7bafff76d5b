#include "hangwatch/slowdown/slowdown_analyzer.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/slowdown/communicator_bandwidth.h"
#include "hangwatch/slowdown/detector.h"

namespace hangwatch::slowdown {
namespace {

// The order matters: a rank gets at most one rank finding, the first pass's, and the
// bus-bandwidth pass folds slow communicators into links the wire-time pass named.
constexpr Detector kDetectors[] = {
    detectSlowGpus,        detectIssueStalls,     detectHostAndDataloaderStalls, detectIntraStepVoid,
    detectBottleneckLinks, detectSlowLinks,       detectBaselineShifts,
};

nlohmann::json measurements(const JobProfile& job) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& [rank, p] : job.ranks()) {
    nlohmann::json gemms = nlohmann::json::object();
    for (const auto& [shape, g] : p.gemmsForFlops()) gemms[shape] = {{"tflops", g.tflops()}, {"count", g.count}};
    nlohmann::json colls = nlohmann::json::array();
    for (const auto& [k, c] : p.collectives) {
      auto bw = c.busbw_gbps();
      colls.push_back({{"name", c.name}, {"comm", c.comm}, {"bytes", c.bytes}, {"count", c.count},
                       {"busbw_gbps", bw ? nlohmann::json(*bw) : nlohmann::json(nullptr)}});
    }
    nlohmann::json il = {{"p10_us", p.issue_latency.percentileNs(0.1) / 1e3},
                         {"p50_us", p.issue_latency.percentileNs(0.5) / 1e3},
                         {"p90_us", p.issue_latency.percentileNs(0.9) / 1e3},
                         {"count", p.issue_latency.count()}};
    ranks.push_back({{"rank", rank}, {"host", p.host}, {"windows", p.windows}, {"gemm", gemms},
                     {"collectives", colls}, {"issue_latency", il},
                     {"void_pct", 100 * p.voidFraction()}, {"inter_step_void_pct", 100 * p.interStepVoidFraction()},
                     {"sync_per_step", p.syncsPerStep()},
                     {"sync_ms_per_step", p.steps ? p.sync_ns / 1e6 / static_cast<double>(p.steps) : 0.0},
                     {"step_ms", p.stepMs()}, {"timeline", p.has_timeline}});
  }
  nlohmann::json comms = nlohmann::json::array();
  for (const CommBandwidth& b : communicatorBandwidth(job))
    comms.push_back({{"communicator", b.key.comm}, {"collective", b.key.name}, {"bytes", b.key.bytes},
                     {"ranks", b.members}, {"busbw_gbps", b.busbw_gbps}, {"time_us", b.duration_ns / 1e3},
                     {"aligned_instances", b.instances}});
  return {{"ranks", ranks}, {"communicators", comms}};
}

// A rank's pipeline stage: its rank in the one communicator it sends and receives on.
std::optional<int> pipelineStage(const TimelineWindow& w) {
  const TimelineOp* first = nullptr;
  for (const TimelineOp& o : w.ops) {
    if (o.cls != "p2p" || o.comm.empty() || o.comm_rank < 0) continue;
    if (first == nullptr) first = &o;
    if (o.comm != first->comm) return std::nullopt;
  }
  return first ? std::optional<int>(first->comm_rank) : std::nullopt;
}

}  // namespace

// Where a rank's steps end in its timeline: the watchdog's step anchor, when it closes enough
// steps in the window. The step tracker keeps the first anchor it took, which in a PyTorch job
// can be a barrier's all-reduce at start-up; then the collective on the rank's largest
// communicator that the window holds most often (ties: the larger payload) stands in.
std::vector<StepEnd> stepEnds(const TimelineWindow& w, const std::optional<StepAnchor>& anchor, size_t enough,
                              bool& fell_back) {
  const auto endsOf = [&](const StepAnchor& a) {
    std::vector<StepEnd> out;
    for (const TimelineOp& o : w.ops)
      if (a.closes(o) && o.end_ns > 0) out.push_back({o.seq, o.end_ns});
    return out;
  };
  std::vector<StepEnd> ends = anchor ? endsOf(*anchor) : std::vector<StepEnd>{};
  fell_back = ends.size() < enough;
  if (!fell_back) return ends;
  std::map<std::tuple<std::string, std::string, uint64_t>, size_t> counts;
  for (const TimelineOp& o : w.ops)
    if (o.cls == "coll" && !o.comm.empty() && o.end_ns > 0) ++counts[{o.name, o.comm, o.bytes}];
  const TimelineOp* best = nullptr;
  std::tuple<int, size_t, uint64_t> best_rank{-1, 0, 0};
  for (const TimelineOp& o : w.ops) {
    if (o.cls != "coll" || o.comm.empty()) continue;
    const std::tuple<int, size_t, uint64_t> rank{o.comm_size, counts[{o.name, o.comm, o.bytes}], o.bytes};
    if (rank > best_rank) best_rank = rank, best = &o;
  }
  if (best == nullptr || std::get<1>(best_rank) <= ends.size()) return ends;
  return endsOf(StepAnchor{best->name, best->comm, best->bytes});
}

std::optional<CriticalPathAnalysis> criticalPathOf(const JobProfile& job, std::vector<std::string>& notes) {
  const CriticalPathThresholds t;
  std::map<int, RankTimeline> ranks;
  std::vector<int> no_anchor, fell_back;
  for (const auto& [rank, w] : job.timelines()) {
    auto p = job.ranks().find(rank);
    bool fallback = false;
    std::vector<StepEnd> ends =
        stepEnds(w, p == job.ranks().end() ? std::nullopt : p->second.step_anchor, t.min_steps + 1, fallback);
    if (ends.empty()) {
      no_anchor.push_back(rank);
      continue;
    }
    if (fallback) fell_back.push_back(rank);
    RankTimeline& rt = ranks[rank];
    rt.timeline = &w;
    rt.stage = pipelineStage(w);
    rt.step_ends = std::move(ends);
  }
  if (!no_anchor.empty())
    notes.push_back(fmt::format("critical path: rank(s) {} have no collective to end their steps: left out of the "
                                "step graph",
                                fmt::join(no_anchor, ",")));
  if (!fell_back.empty())
    notes.push_back(fmt::format("critical path: on rank(s) {} the watchdog's step anchor closes too few steps in the "
                                "timeline; steps end at the collective on the largest communicator the timeline holds "
                                "most often",
                                fmt::join(fell_back, ",")));
  if (ranks.size() < 2) return std::nullopt;
  CriticalPathAnalysis a = analyzeCriticalPath(ranks, t);
  for (const std::string& n : a.notes) notes.push_back("critical path: " + n);
  if (a.steps.empty()) return std::nullopt;
  return a;
}

SlowdownAnalysis SlowdownAnalyzer::analyze(const JobProfile& job, const JobProfile* baseline) const {
  SlowdownAnalysis out;
  out.notes = job.problems();
  if (job.ranks().size() < t_.min_ranks)
    out.notes.push_back(
        fmt::format("only {} rank(s) with metrics: ranks are not compared with each other", job.ranks().size()));
  const DetectorInput in{job, baseline, t_};
  for (Detector detect : kDetectors) detect(in, out);
  for (SlowdownFinding& f : out.findings) std::sort(f.ranks.begin(), f.ranks.end());
  out.metrics = measurements(job);
  if (t_.critical_path) out.critical_path = criticalPathOf(job, out.notes);
  return out;
}

}  // namespace hangwatch::slowdown
