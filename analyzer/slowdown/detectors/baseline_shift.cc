// Against a healthy baseline run: issue stalls and GPU idle that the whole job shifted
// (what ranks compared with each other cannot see).
#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

struct Baseline {
  double p50 = 0;
  double syncs = 0;
  double void_fraction = 0;
  LogHistogram pool;
};

Baseline summarize(const JobProfile& baseline) {
  std::vector<double> p50s, voids, syncs;
  Baseline b;
  for (const auto& [rank, p] : baseline.ranks()) {
    if (!p.issue_latency.empty()) p50s.push_back(p50Ns(p.issue_latency));
    b.pool.merge(p.issue_latency);
    voids.push_back(p.voidFraction());
    syncs.push_back(p.syncsPerStep());
  }
  b.p50 = median(p50s);
  b.syncs = median(syncs);
  b.void_fraction = median(voids);
  return b;
}

void issueShift(const DetectorInput& in, const Baseline& base, SlowdownAnalysis& out) {
  const SlowdownThresholds& t = in.t;
  std::vector<int> shifted;
  std::vector<double> shifted_p50s, shifted_w1, shifted_syncs;
  if (base.p50 >= static_cast<double>(t.issue_min_group_p50_ns)) {
    for (const auto& [rank, p] : in.job.ranks()) {
      if (p.issue_latency.empty() || alreadyFlagged(out, rank)) continue;
      double p50 = p50Ns(p.issue_latency);
      double w1 = LogHistogram::wasserstein1Ns(p.issue_latency, base.pool);
      if (p50 > t.issue_collapse_ratio * base.p50 || w1 < t.issue_w1_fraction * base.p50) continue;
      if (!(p.syncsPerStep() >= t.sync_ratio * base.syncs && p.syncsPerStep() >= base.syncs + 2)) continue;
      shifted.push_back(rank);
      shifted_p50s.push_back(p50);
      shifted_w1.push_back(w1);
      shifted_syncs.push_back(p.syncsPerStep());
    }
  }
  if (shifted.empty()) return;
  SlowdownFinding f;
  f.kind = "issue-stall";
  f.ranks = shifted;
  f.metric = "issue_latency_p50_us";
  f.value = median(shifted_p50s) / 1e3;
  f.group_median = base.p50 / 1e3;
  f.owner = "algorithm";
  f.evidence.push_back(fmt::format(
      "{} rank(s) start kernels {:.1f} us after launch (median) against {:.1f} us in the baseline run: the host no "
      "longer queues work ahead of the GPU",
      shifted.size(), f.value, f.group_median));
  f.evidence.push_back(
      fmt::format("Wasserstein-1 shift from the baseline's issue latency: {:.1f} us", median(shifted_w1) / 1e3));
  f.evidence.push_back(fmt::format(
      "{:.1f} host synchronizations per step against {:.1f} in the baseline: look for an unnecessary synchronize",
      median(shifted_syncs), base.syncs));
  out.findings.push_back(std::move(f));
}

void voidShift(const DetectorInput& in, const Baseline& base, SlowdownAnalysis& out) {
  std::vector<int> idle;
  std::vector<double> idle_values;
  for (const auto& [rank, p] : in.job.ranks()) {
    if (alreadyFlagged(out, rank)) continue;
    if (p.voidFraction() - base.void_fraction >= in.t.baseline_void_points &&
        p.voidFraction() >= 1.5 * base.void_fraction) {
      idle.push_back(rank);
      idle_values.push_back(p.voidFraction());
    }
  }
  if (idle.empty()) return;
  // A few ranks idling more than the baseline are judged against the rest of this run
  // (host, dataloader and in-step void checks); the baseline decides only what the whole
  // job shifted. On a loaded CI machine one rank's void moved 14% -> 25% with no cause.
  if (2 * idle.size() < in.job.ranks().size()) {
    out.notes.push_back(fmt::format(
        "{} of {} rank(s) idle more than in the baseline run ({:.1f}% against {:.1f}%), but not the job as a whole: "
        "not flagged",
        idle.size(), in.job.ranks().size(), 100 * median(idle_values), 100 * base.void_fraction));
    return;
  }
  SlowdownFinding f;
  f.kind = "void";
  f.ranks = idle;
  f.metric = "void_pct";
  f.value = 100 * median(idle_values);
  f.group_median = 100 * base.void_fraction;
  f.owner = "infrastructure";
  f.evidence.push_back(fmt::format("{} rank(s) leave the GPU idle {:.1f}% of the time against {:.1f}% in the baseline run",
                                   idle.size(), f.value, f.group_median));
  out.findings.push_back(std::move(f));
}

}  // namespace

void detectBaselineShifts(const DetectorInput& in, SlowdownAnalysis& out) {
  if (in.baseline == nullptr) return;
  const Baseline base = summarize(*in.baseline);
  issueShift(in, base, out);
  voidShift(in, base, out);
}

}  // namespace hangwatch::slowdown
