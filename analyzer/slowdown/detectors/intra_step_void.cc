// void: a rank's GPU idles between kernels inside its steps more than the group's.
#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {

void detectIntraStepVoid(const DetectorInput& in, SlowdownAnalysis& out) {
  const SlowdownThresholds& t = in.t;
  if (in.job.ranks().size() < t.min_ranks) return;
  std::vector<double> fractions;
  for (const auto& [rank, p] : in.job.ranks()) fractions.push_back(p.voidFraction() - p.interStepVoidFraction());
  RobustSpread s = robustSpread(fractions, t.spread_floor);
  for (const auto& [rank, p] : in.job.ranks()) {
    if (alreadyFlagged(out, rank)) continue;
    double v = p.voidFraction() - p.interStepVoidFraction();
    if (robustZ(v, s) < t.outlier_z || v - s.median < t.void_min_fraction) continue;
    SlowdownFinding f;
    f.kind = "void";
    f.ranks = {rank};
    f.metric = "intra_step_void_pct";
    f.value = 100 * v;
    f.group_median = 100 * s.median;
    f.owner = "infrastructure";
    f.evidence.push_back(fmt::format("{}'s GPU idles between kernels inside its steps {:.1f}% of the time, the group {:.1f}%",
                                     rankName(p), 100 * v, 100 * s.median));
    out.findings.push_back(std::move(f));
  }
}

}  // namespace hangwatch::slowdown
