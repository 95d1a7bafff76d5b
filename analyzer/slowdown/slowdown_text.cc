#include "hangwatch/slowdown/slowdown_text.h"

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

}  // namespace

std::string formatSlowdownText(const SlowdownAnalysis& a, const std::string& job_dir, bool with_baseline) {
  std::string out =
      fmt::format("slowdown analysis of {}{}\n", job_dir, with_baseline ? " (against a baseline run)" : "");
  if (a.findings.empty()) out += "no findings: no rank, link or communicator stands out\n";
  for (const SlowdownFinding& f : a.findings) writeFinding(out, f, with_baseline);
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
          {"metrics", a.metrics}};
}

}  // namespace hangwatch::slowdown
