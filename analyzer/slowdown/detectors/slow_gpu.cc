// slow-gpu: a rank low in TFLOPS on the GEMM shapes that hold most of its GEMM time.
#include <map>

#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {

void detectSlowGpus(const DetectorInput& in, SlowdownAnalysis& out) {
  const SlowdownThresholds& t = in.t;
  if (in.job.ranks().size() < t.min_ranks) return;
  // Per shape: the group's TFLOPS; a rank is slow when it is low on the shapes that
  // hold most of its GEMM time (so one odd small shape does not decide).
  std::map<std::string, std::vector<double>> by_shape;
  for (const auto& [rank, p] : in.job.ranks())
    for (const auto& [shape, g] : p.gemmsForFlops())
      if (g.count > 0) by_shape[shape].push_back(g.tflops());
  for (const auto& [rank, p] : in.job.ranks()) {
    int64_t slow_ns = 0, total_ns = 0;
    double worst_ratio = 1, value = 0, group = 0;
    std::string worst_shape;
    for (const auto& [shape, g] : p.gemmsForFlops()) {
      const auto& values = by_shape[shape];
      if (values.size() < t.min_ranks || g.count == 0) continue;
      RobustSpread s = robustSpread(values, t.spread_floor);
      total_ns += g.ns;
      double ratio = s.median > 0 ? g.tflops() / s.median : 1;
      if (robustZ(g.tflops(), s) <= -t.outlier_z && ratio <= t.slow_gpu_ratio) {
        slow_ns += g.ns;
        if (ratio < worst_ratio) {
          worst_ratio = ratio;
          value = g.tflops();
          group = s.median;
          worst_shape = shape;
        }
      }
    }
    if (total_ns == 0 || slow_ns * 2 < total_ns) continue;
    SlowdownFinding f;
    f.kind = "slow-gpu";
    f.ranks = {rank};
    f.metric = "gemm_tflops[" + worst_shape + "]";
    f.value = value;
    f.group_median = group;
    f.owner = "operations";
    f.evidence.push_back(fmt::format(
        "{} runs GEMM {} at {:.4g} TFLOPS against a group median of {:.4g} ({:.0f}%); low on shapes holding "
        "{:.0f}% of its GEMM time",
        rankName(p), worst_shape, value, group, 100 * worst_ratio, 100.0 * slow_ns / total_ns));
    if (!p.gemms_alone.empty())
      f.evidence.push_back("TFLOPS counted from GEMMs that overlapped no communication kernel where there were enough");
    out.findings.push_back(std::move(f));
  }
}

}  // namespace hangwatch::slowdown
