#include "hangwatch/slowdown/slowdown_text.h"

#include <cstdio>
#include <sstream>

namespace hangwatch::slowdown {
namespace {

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

std::string formatSlowdownText(const SlowdownAnalysis& a, const std::string& job_dir, bool with_baseline) {
  std::ostringstream out;
  out << "slowdown analysis of " << job_dir << (with_baseline ? " (against a baseline run)" : "") << "\n";
  if (a.findings.empty()) out << "no findings: no rank, link or communicator stands out\n";
  for (const SlowdownFinding& f : a.findings) {
    out << "\n[" << f.kind << "] ";
    if (f.link)
      out << "link " << f.link->from << "->" << f.link->to << " on communicator " << f.communicator;
    else if (!f.communicator.empty())
      out << "communicator " << f.communicator << " (ranks " << ranksText(f.ranks) << ")";
    else
      out << (f.ranks.size() == 1 ? "rank " : "ranks ") << ranksText(f.ranks);
    out << ": " << f.metric << " = " << number(f.value) << " against " << number(f.group_median)
        << (with_baseline && f.kind != "slow-gpu" ? " (group or baseline)" : " (group median)") << "; owner: " << f.owner
        << "\n";
    for (const std::string& e : f.evidence) out << "  - " << e << "\n";
  }
  if (!a.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : a.notes) out << "  - " << n << "\n";
  }
  return out.str();
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
