#include "hangwatch/slowdown/slowdown_text.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hangwatch::slowdown {
namespace {

std::string ranksText(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ",")); }

void writeFinding(std::string& out, const SlowdownFinding& f, bool with_baseline) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "\n[{}] ", f.kind);
  if (f.link)
    fmt::format_to(o, "link {}->{} on communicator {}", f.link->from, f.link->to, f.communicator);
  else if (!f.communicator.empty())
    fmt::format_to(o, "communicator {} (ranks {})", f.communicator, ranksText(f.ranks));
  else
    fmt::format_to(o, "{}{}", f.ranks.size() == 1 ? "rank " : "ranks ", ranksText(f.ranks));
  fmt::format_to(o, ": {} = {:.4g} against {:.4g}{}; owner: {}\n", f.metric, f.value, f.group_median,
                 with_baseline && f.kind != "slow-gpu" ? " (group or baseline)" : " (group median)", f.owner);
  for (const std::string& e : f.evidence) fmt::format_to(o, "  - {}\n", e);
}

std::string rankPlace(const CriticalPathAnalysis& a, int rank) {
  auto it = a.stages.find(rank);
  return it == a.stages.end() ? fmt::format("rank {}", rank) : fmt::format("rank {} (stage {})", rank, it->second);
}

std::string shares(const std::map<int, int64_t>& by_rank, const std::map<std::string, int64_t>& by_kind, double total_ns) {
  std::vector<std::pair<int64_t, std::string>> parts;
  for (const auto& [r, ns] : by_rank) parts.push_back({ns, fmt::format("rank {} {:.0f}%", r, 100 * ns / total_ns)});
  std::sort(parts.rbegin(), parts.rend());
  std::vector<std::string> ranks, kinds;
  for (size_t i = 0; i < parts.size() && i < 6; ++i) ranks.push_back(parts[i].second);
  for (const auto& [k, ns] : by_kind) kinds.push_back(fmt::format("{} {:.0f}%", k, 100 * ns / total_ns));
  return fmt::format("{}; {}", fmt::join(ranks, ", "), fmt::join(kinds, ", "));
}

// The slowest step's path, one line per segment, and what made slow steps slow.
void writeCriticalPath(std::string& out, const CriticalPathAnalysis& a) {
  auto o = std::back_inserter(out);
  const StepPath& slowest = *std::find_if(a.steps.begin(), a.steps.end(), [&](auto& s) { return s.id == a.slowest_step; });
  fmt::format_to(o, "\ncritical path: {} step(s), usually {:.1f} ms; the slowest (step {}) took {:.1f} ms\n",
                 a.steps.size(), a.baseline_step_ms, slowest.id, slowest.ms());
  if (a.causes.empty()) out += "  no step was made slow by one rank: nothing to blame\n";
  for (const SlowStepCause& c : a.causes) {
    const std::string who = c.rank >= 0 ? rankPlace(a, c.rank)
                                        : fmt::format("stage {} (ranks {})", c.stage.value_or(-1), fmt::join(c.ranks, ","));
    fmt::format_to(o, "  [cause] {}: {} {}\n", who, c.kind, c.op);
    for (const std::string& e : c.evidence) fmt::format_to(o, "    - {}\n", e);
  }
  for (const AbsorbedSlowdown& s : a.absorbed) {
    fmt::format_to(o, "  [absorbed] {}: {}\n", rankPlace(a, s.rank), s.kind);
    for (const std::string& e : s.evidence) fmt::format_to(o, "    - {}\n", e);
  }
  // Shares of the path itself: it may begin before the step's start (a rank that ended the
  // previous step early starts its work, and the path, sooner).
  double total = 0;
  for (const PathSegment& seg : slowest.segments) total += static_cast<double>(seg.end_ns - seg.start_ns);
  total = std::max(total, 1.0);
  fmt::format_to(o, "  share of step {}'s path: {}\n", slowest.id, shares(slowest.rank_ns, slowest.kind_ns, total));
  fmt::format_to(o, "  step {}, one line per segment (ms from the step's start):\n", slowest.id);
  for (const PathSegment& seg : slowest.segments) {
    const std::string what = seg.kind == "host" ? (seg.op == "launch" ? "host: issued late" : "GPU gap: untimed work or a wait on another stream")
                                                : fmt::format("{} {}{}", seg.kind, seg.op,
                                                              seg.ops > 1 ? fmt::format(" x{}", seg.ops) : "");
    fmt::format_to(o, "    {:8.2f} {:7.2f} ms  {}  {}\n", (seg.start_ns - slowest.start_ns) / 1e6,
                   (seg.end_ns - seg.start_ns) / 1e6, rankPlace(a, seg.rank), what);
  }
}

}  // namespace

std::string formatSlowdownText(const SlowdownAnalysis& a, const std::string& job_dir, bool with_baseline) {
  std::string out =
      fmt::format("slowdown analysis of {}{}\n", job_dir, with_baseline ? " (against a baseline run)" : "");
  if (a.findings.empty()) out += "no findings: no rank, link or communicator stands out\n";
  for (const SlowdownFinding& f : a.findings) writeFinding(out, f, with_baseline);
  if (a.critical_path) writeCriticalPath(out, *a.critical_path);
  if (!a.notes.empty()) {
    out += "\nnotes:\n";
    for (const std::string& n : a.notes) fmt::format_to(std::back_inserter(out), "  - {}\n", n);
  }
  return out;
}

nlohmann::json slowdownJson(const SlowdownAnalysis& a, const std::string& job_dir, const std::string& baseline_dir) {
  nlohmann::json findings = nlohmann::json::array();
  for (const SlowdownFinding& f : a.findings) findings.push_back(toJson(f));
  return {{"job_dir", job_dir},
          {"baseline", baseline_dir.empty() ? nlohmann::json(nullptr) : nlohmann::json(baseline_dir)},
          {"findings", findings},
          {"notes", a.notes},
          {"metrics", a.metrics},
          {"critical_path", a.critical_path ? toJson(*a.critical_path) : nlohmann::json(nullptr)}};
}

}  // namespace hangwatch::slowdown
