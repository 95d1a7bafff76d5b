#include "hangwatch/verdict/text_report_writer.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace hangwatch::verdict {
namespace {

constexpr int kGridColumns = 64;
constexpr int kGridMaxRanks = 8192;    // beyond this the class list says enough
constexpr size_t kClassesShown = 12;
constexpr size_t kFramesShown = 6;

// C++ template arguments make labels of hundreds of characters; the grid needs the gist.
std::string shortLabel(const std::string& label) {
  constexpr size_t kMax = 60;
  return label.size() <= kMax ? label : label.substr(0, kMax - 3) + "...";
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return c == '-' ? ' ' : std::toupper(c); });
  return s;
}

}  // namespace

char TextReportWriter::classLetter(int index) {
  if (index < 0) return '.';
  if (index < 26) return static_cast<char>('A' + index);
  if (index < 52) return static_cast<char>('a' + index - 26);
  return '#';
}

namespace {

void writeVerdict(std::ostringstream& o, const Report& r) {
  const Verdict& v = r.verdict;
  o << "VERDICT: " << upper(verdictKindName(v.kind)) << "\n" << v.headline << "\n";
  if (v.culprit_link) {
    o << "  culprit link: rank " << v.culprit_link->from << " -> rank " << v.culprit_link->to
      << (v.link_in_comm_ranks ? " (communicator ranks: one process drives several devices)" : "") << "\n";
  }
  if (!v.culprit_ranks.empty()) {
    o << "  culprit rank(s):";
    for (int c : v.culprit_ranks) o << " " << describeRank(r.job, c);
    o << "\n";
  }
  if (v.op) o << "  operation: " << v.op->name << (v.op->seq ? fmt::format(" seq {}", *v.op->seq) : "") << "\n";
  if (!v.communicator.empty()) o << "  communicator: " << v.communicator << "\n";
  if (v.channels_total)
    o << "  ring channels agreeing: " << v.channels_agree << " of " << v.channels_total
      << (v.confident ? "" : " (on the connections seen)") << "\n";
  if (!v.source.empty()) {
    o << "  ring progress from: "
      << (v.source == "profiler"   ? "NCCL's profiler events in the snapshots (no debugger)"
          : v.source == "debugger" ? "the collector's debugger phase"
                                   : "the debugger phase and NCCL's profiler events")
      << "\n";
  }
}

// As prominent as the verdict: what it hinges on and who is still possible.
void writeConfidence(std::ostringstream& o, const Report& r) {
  const Verdict& v = r.verdict;
  if (!v.confident) {
    o << "\nNOT CONFIDENT: the verdict hinges on " << (v.hinges_on.empty() ? "data that is missing" : v.hinges_on) << "\n";
    if (!v.suspects.empty()) {
      o << "  suspects:";
      for (size_t i = 0; i < v.suspects.size(); ++i) o << (i ? "; " : " ") << v.suspects[i].text;
      o << "\n";
    }
    for (const DataGap& g : v.lacking_data) o << "  rank " << g.rank << " lacks data: " << g.lacks << "\n";
  }
  if (!r.job.ranks_collecting.empty()) {
    stackmerge::RankSet collecting;
    for (int c : r.job.ranks_collecting) collecting.insert(c);
    o << "STILL COLLECTING: rank(s) " << collecting.toString()
      << " had not finished dumping when this report was made; run it again (forensics report --wait S)\n";
  }
}

void writeJob(std::ostringstream& o, const Report& r) {
  o << "\nJob " << r.job.job_id << " in " << r.job.job_dir << ": " << r.job.ranks.size() << " of " << r.job.world_size
    << " rank(s) answered" << (r.job.world_size_known ? "" : " (world size guessed from the files)") << "\n";
  if (!r.job.ranks_missing.empty()) {
    stackmerge::RankSet missing;
    for (int m : r.job.ranks_missing) missing.insert(m);
    o << "  ranks missing (no usable dump): " << missing.toString() << "\n";
  }
  for (const PartialRank& p : r.job.ranks_partial) {
    o << "  rank " << p.rank << ": " << p.missing << " missing: " << p.reason << "\n";
  }
  for (const std::string& p : r.job.problems) o << "  note: " << p << "\n";
}

void writeStackClasses(std::ostringstream& o, const Report& r) {
  if (r.stack_classes.empty()) return;
  o << "\nStack classes (" << r.stack_classes.size() << "):\n";
  for (size_t i = 0; i < r.stack_classes.size() && i < kClassesShown; ++i) {
    const stackmerge::StackClass& c = r.stack_classes[i];
    o << "  " << TextReportWriter::classLetter(static_cast<int>(i)) << "  " << c.ranks.size()
      << " rank(s): " << c.ranks.toString() << "\n";
    for (size_t t = 0; t < c.thread_stacks.size(); ++t) {
      const auto& st = c.thread_stacks[t];
      o << "       " << (t < c.thread_names.size() ? c.thread_names[t] : "?") << ": ";
      for (size_t k = 0; k < st.size() && k < kFramesShown; ++k) o << (k ? " <- " : "") << shortLabel(st[k]);
      if (st.size() > kFramesShown) o << " <- ...";
      o << "\n";
    }
  }
  if (r.stack_classes.size() > kClassesShown) o << "  ... " << r.stack_classes.size() - kClassesShown << " more\n";
}

void writeGrid(std::ostringstream& o, const Report& r) {
  if (r.job.world_size <= 0 || r.job.world_size > kGridMaxRanks) return;
  const Verdict& v = r.verdict;
  o << "\nRank grid (letter = stack class, . = no stacks, * = culprit):\n";
  for (int row = 0; row < r.job.world_size; row += kGridColumns) {
    o << fmt::format("{:6d}  ", row);
    for (int k = row; k < std::min(row + kGridColumns, r.job.world_size); ++k) {
      bool culprit = std::find(v.culprit_ranks.begin(), v.culprit_ranks.end(), k) != v.culprit_ranks.end();
      o << (culprit ? '*' : TextReportWriter::classLetter(r.rank_class[k]));
    }
    o << "\n";
  }
}

}  // namespace

std::string TextReportWriter::write(const Report& r) {
  const Verdict& v = r.verdict;
  std::ostringstream o;
  writeVerdict(o, r);
  writeConfidence(o, r);
  if (!v.next_steps.empty()) {
    o << "\nWhat to do next:\n";
    for (const std::string& s : v.next_steps) o << "  - " << s << "\n";
  }
  o << "\nEvidence:\n";
  for (const std::string& e : v.evidence) o << "  - " << e << "\n";
  for (const CulpritStack& c : v.where) {
    o << "\nWhere rank " << c.rank << " is (thread " << c.thread << ", innermost first):\n";
    for (const std::string& f : c.frames) o << "    " << f << "\n";
  }
  writeJob(o, r);
  writeStackClasses(o, r);
  writeGrid(o, r);
  return o.str();
}

}  // namespace hangwatch::verdict
