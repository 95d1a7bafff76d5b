// dataloader-stall / host-stall: a rank's GPU idles between steps far more than the
// group's; how many of its steps are late tells an input pipeline from a host pause.
#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

// Late in most steps: every batch arrives late (input pipeline). Late in a few:
// intermittent host work (GC, checkpointing, logging) on the training thread. Late in none of
// the steps its timeline holds: the idle came before them (start-up, a one-off pause on a
// loaded host), nothing to point at; false then, and the caller notes it instead.
bool addLateSteps(const DetectorInput& in, int rank, const RankProfile& p, SlowdownFinding& f) {
  std::vector<double> other_gaps;
  for (const auto& [r, q] : in.job.ranks())
    if (r != rank)
      for (int64_t g : q.step_gaps_ns) other_gaps.push_back(static_cast<double>(g));
  const double typical = median(other_gaps);
  size_t late = 0;
  for (int64_t g : p.step_gaps_ns)
    if (static_cast<double>(g) > in.t.late_step_ratio * typical + 1e6) ++late;
  const bool have_steps = p.step_gaps_ns.size() >= 5 && !other_gaps.empty();
  const double share = have_steps ? static_cast<double>(late) / static_cast<double>(p.step_gaps_ns.size()) : 1;
  f.kind = share >= in.t.dataloader_step_share ? "dataloader-stall" : "host-stall";
  if (!have_steps) return true;
  if (late == 0) return false;
  f.evidence.push_back(fmt::format("the gap exceeds {:.1f} ms in {} of its last {} steps: {}",
                                   (in.t.late_step_ratio * typical + 1e6) / 1e6, late, p.step_gaps_ns.size(),
                                   f.kind == "dataloader-stall" ? "nearly every batch is late (input pipeline)"
                                                                : "an intermittent host pause (GC, checkpoint, logging)"));
  return true;
}

}  // namespace

void detectHostAndDataloaderStalls(const DetectorInput& in, SlowdownAnalysis& out) {
  const SlowdownThresholds& t = in.t;
  if (in.job.ranks().size() < t.min_ranks) return;
  std::vector<double> fractions;
  for (const auto& [rank, p] : in.job.ranks())
    if (p.inter_step_void_ns) fractions.push_back(p.interStepVoidFraction());
  if (fractions.size() < t.min_ranks) return;
  RobustSpread s = robustSpread(fractions, t.spread_floor);
  for (const auto& [rank, p] : in.job.ranks()) {
    if (!p.inter_step_void_ns || alreadyFlagged(out, rank)) continue;
    double v = p.interStepVoidFraction();
    if (robustZ(v, s) < t.outlier_z || v < t.gap_ratio * s.median || v - s.median < t.gap_min_fraction) continue;
    SlowdownFinding f;
    f.ranks = {rank};
    f.metric = "inter_step_void_pct";
    f.value = 100 * v;
    f.group_median = 100 * s.median;
    f.owner = "algorithm";
    f.evidence.push_back(fmt::format(
        "{}'s GPU is idle between steps {:.1f}% of the time, the group {:.1f}%: the other ranks wait for it inside "
        "the next collective",
        rankName(p), 100 * v, 100 * s.median));
    if (!addLateSteps(in, rank, p, f)) {
      out.notes.push_back(fmt::format("{} idled between steps {:.1f}% of the time (the group {:.1f}%), but none of the "
                                      "{} steps its timeline holds was late: the idle came before them (start-up, a "
                                      "one-off pause); not flagged",
                                      rankName(p), 100 * v, 100 * s.median, p.step_gaps_ns.size()));
      continue;
    }
    out.findings.push_back(std::move(f));
  }
}

}  // namespace hangwatch::slowdown
