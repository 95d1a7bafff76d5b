// issue-stall: kernels start right after their launch (the host no longer queues work
// ahead) and the rank synchronizes with the host more often than the others.
#include <algorithm>

#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

LogHistogram pooledExcept(const JobProfile& job, int except) {
  LogHistogram pooled;
  for (const auto& [rank, p] : job.ranks())
    if (rank != except) pooled.merge(p.issue_latency);
  return pooled;
}

}  // namespace

void detectIssueStalls(const DetectorInput& in, SlowdownAnalysis& out) {
  const SlowdownThresholds& t = in.t;
  if (in.job.ranks().size() < t.min_ranks) return;
  std::vector<double> p50s, syncs;
  for (const auto& [rank, p] : in.job.ranks()) {
    if (p.issue_latency.empty()) continue;
    p50s.push_back(p50Ns(p.issue_latency));
    syncs.push_back(p.syncsPerStep());
  }
  if (p50s.size() < t.min_ranks) return;
  const double group_p50 = median(p50s);
  const double group_syncs = median(syncs);
  if (group_p50 < static_cast<double>(t.issue_min_group_p50_ns)) return;
  for (const auto& [rank, p] : in.job.ranks()) {
    if (p.issue_latency.empty() || alreadyFlagged(out, rank)) continue;
    double p50 = p50Ns(p.issue_latency);
    double w1 = LogHistogram::wasserstein1Ns(p.issue_latency, pooledExcept(in.job, rank));
    if (p50 > t.issue_collapse_ratio * group_p50 || w1 < t.issue_w1_fraction * group_p50) continue;
    // A collapse alone can be a starved host thread (CPU contention on the node); the
    // finding wants the user-code cause the metrics can show: extra synchronizations.
    if (!(p.syncsPerStep() >= t.sync_ratio * group_syncs && p.syncsPerStep() >= group_syncs + 2)) {
      out.notes.push_back(fmt::format(
          "{}: kernel issue latency collapsed (p50 {:.1f} us, group {:.1f} us) without extra synchronizations; "
          "not flagged (a busy or starved host thread looks the same)",
          rankName(p), p50 / 1e3, group_p50 / 1e3));
      continue;
    }
    SlowdownFinding f;
    f.kind = "issue-stall";
    f.ranks = {rank};
    f.metric = "issue_latency_p50_us";
    f.value = p50 / 1e3;
    f.group_median = group_p50 / 1e3;
    f.owner = "algorithm";
    f.evidence.push_back(fmt::format(
        "{}: kernels start {:.1f} us after their launch (median), the group {:.1f} us: the GPU runs dry, the host "
        "no longer queues work ahead",
        rankName(p), p50 / 1e3, group_p50 / 1e3));
    f.evidence.push_back(fmt::format("Wasserstein-1 distance to the other ranks' issue latency: {:.1f} us", w1 / 1e3));
    f.evidence.push_back(fmt::format(
        "{:.1f} host synchronizations per step against {:.1f} on the other ranks ({:.1f} ms per step blocked): "
        "look for an unnecessary synchronize",
        p.syncsPerStep(), group_syncs, p.sync_ns / 1e6 / std::max<double>(p.steps, 1)));
    out.findings.push_back(std::move(f));
  }
}

}  // namespace hangwatch::slowdown
