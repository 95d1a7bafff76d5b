#include <algorithm>

#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"

namespace hangwatch::slowdown {

std::string rankName(const RankProfile& p) {
  return fmt::format("rank {}{}", p.rank, p.host.empty() ? "" : " (" + p.host + ")");
}

bool alreadyFlagged(const SlowdownAnalysis& out, int rank) {
  for (const SlowdownFinding& f : out.findings)
    if (f.kind != "slow-link" && std::count(f.ranks.begin(), f.ranks.end(), rank)) return true;
  return false;
}

double p50Ns(const LogHistogram& h) { return h.empty() ? 0 : h.percentileNs(0.5); }

}  // namespace hangwatch::slowdown
