#include "hangwatch/verdict/gpu_ranks.h"
#include "hangwatch/verdict/text_report_writer.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "wording_text.h"

#include "hangwatch/verdict/verdict_wording.h"

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

using Out = std::back_insert_iterator<std::string>;

void writeVerdict(Out o, const Report& r) {
  const Verdict& v = r.verdict;
  fmt::format_to(o, "VERDICT: {}\n{}\n", upper(verdictKindName(v.kind)), v.headline);
  if (v.culprit_link) {
    fmt::format_to(o, "  culprit link: rank {} -> rank {}{}\n", v.culprit_link->from, v.culprit_link->to,
                   v.link_in_comm_ranks ? " (communicator ranks: one process drives several devices)" : "");
    for (const LinkNic& n : v.culprit_link_nics)
      fmt::format_to(o, "  {} NIC: rank {} on {}: {}{}\n", n.sends ? "sending" : "receiving", n.rank,
                     n.host.empty() ? "?" : n.host, n.device.empty() ? fmt::format("net device {}", n.index) : n.device,
                     n.port ? fmt::format(" port {}", *n.port) : "");
  }
  if (!v.culprit_ranks.empty()) {
    fmt::format_to(o, "  culprit rank(s):");
    for (int c : v.culprit_ranks) fmt::format_to(o, " {}", describeRank(r.job, c));
    fmt::format_to(o, "\n");
  }
  for (const RankPlaceInJob& p : v.places)
    fmt::format_to(o, "  pipeline: rank {} in stage {} of {} (ranks {})\n", p.rank, p.stage, p.stages,
                   wording::ranksText(p.stage_ranks));
  if (v.op) fmt::format_to(o, "  operation: {}{}\n", v.op->name, v.op->seq ? fmt::format(" seq {}", *v.op->seq) : "");
  if (!v.communicator.empty()) fmt::format_to(o, "  communicator: {}\n", v.communicator);
  if (v.channels_total)
    fmt::format_to(o, "  channels agreeing: {} of {}{}\n", v.channels_agree, v.channels_total,
                   v.confident ? "" : " (on the connections seen)");
  if (!v.source.empty()) {
    fmt::format_to(o, "  progress from: {}\n",
                   v.source == "profiler"   ? "NCCL's profiler events in the snapshots (no debugger)"
                   : v.source == "debugger" ? "the collector's debugger phase"
                                            : "the debugger phase and NCCL's profiler events");
  }
}

// As prominent as the verdict: what it hinges on and who is still possible.
void writeConfidence(Out o, const Report& r) {
  const Verdict& v = r.verdict;
  if (!v.confident) {
    fmt::format_to(o, "\nNOT CONFIDENT: the verdict hinges on {}\n",
                   v.hinges_on.empty() ? "data that is missing" : v.hinges_on);
    if (!v.suspects.empty()) {
      fmt::format_to(o, "  suspects:");
      for (size_t i = 0; i < v.suspects.size(); ++i) {
        const std::string hosts = hostsText(v.suspects[i]);
        fmt::format_to(o, "{}{}{}", i ? "; " : " ", v.suspects[i].text, hosts.empty() ? "" : " [" + hosts + "]");
      }
      fmt::format_to(o, "\n");
    }
    for (const DataGap& g : v.lacking_data) fmt::format_to(o, "  rank {} lacks data: {}\n", g.rank, g.lacks);
  }
  if (!r.job.ranks_collecting.empty()) {
    stackmerge::RankSet collecting;
    for (int c : r.job.ranks_collecting) collecting.insert(c);
    fmt::format_to(o,
                   "STILL COLLECTING: rank(s) {} had not finished dumping when this report was made; run it again "
                   "(forensics report --wait S)\n",
                   collecting.toString());
  }
}

void writeActions(Out o, const Verdict& v) {
  if (!v.next_steps.empty()) {
    fmt::format_to(o, "\nWhat to do next:\n");
    for (const std::string& s : v.next_steps) fmt::format_to(o, "  - {}\n", s);
  }
  fmt::format_to(o, "\nEvidence:\n");
  for (const std::string& e : v.evidence) fmt::format_to(o, "  - {}\n", e);
  for (const CulpritStack& c : v.where) {
    fmt::format_to(o, "\nWhere rank {} is (thread {}, innermost first):\n", c.rank, c.thread);
    for (const std::string& f : c.frames) fmt::format_to(o, "    {}\n", f);
  }
}

// One line per node, the verdict's part in it said; at thousands of nodes, the ones the verdict
// involves and the first few.
void writeNodes(Out o, const Report& r) {
  if (r.nodes.size() < 2) return;
  constexpr size_t kShown = 16;
  fmt::format_to(o, "  nodes ({}; links between them are network links):\n", r.nodes.size());
  size_t shown = 0;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const NodeRanks& n = r.nodes[i];
    const std::string role = nodeRole(r.verdict, n.ranks);
    if (role.empty() && i >= kShown) continue;
    ++shown;
    fmt::format_to(o, "    {}: ranks {}{}\n", n.host, n.ranks.toString(), role.empty() ? "" : "  <- " + role);
  }
  if (shown < r.nodes.size()) fmt::format_to(o, "    ... {} more node(s)\n", r.nodes.size() - shown);
}

void writeJob(Out o, const Report& r) {
  fmt::format_to(o, "\nJob {} in {} (stage: {}): {} of {} {}rank(s) answered{}\n", r.job.job_id, r.job.job_dir,
                 stageName(r.job.stage), r.job.ranks.size(), r.job.world_size, r.job.gpu_ranks.empty() ? "" : "GPU ",
                 r.job.world_size_known ? "" : " (world size guessed from the files)");
  if (!r.job.gpu_ranks.empty())
    fmt::format_to(o, "  {}\n", gpuRanksText(r.job));
  if (r.job.attempt.count > 1)
    fmt::format_to(o, "  {}\n", attemptText(r.job.attempt));
  if (!r.job.ranks_missing.empty()) {
    stackmerge::RankSet missing;
    for (int m : r.job.ranks_missing) missing.insert(m);
    fmt::format_to(o, "  ranks missing (no usable dump): {}\n", missing.toString());
  }
  writeNodes(o, r);
  for (const PartialRank& p : r.job.ranks_partial) fmt::format_to(o, "  rank {}: {} missing: {}\n", p.rank, p.missing, p.reason);
  for (const std::string& p : r.job.problems) fmt::format_to(o, "  note: {}\n", p);
}

void writeStackClasses(Out o, const Report& r) {
  if (r.stack_classes.empty()) return;
  fmt::format_to(o, "\nStack classes ({}):\n", r.stack_classes.size());
  for (size_t i = 0; i < r.stack_classes.size() && i < kClassesShown; ++i) {
    const stackmerge::StackClass& c = r.stack_classes[i];
    fmt::format_to(o, "  {}  {} rank(s): {}\n", TextReportWriter::classLetter(static_cast<int>(i)), c.ranks.size(),
                   c.ranks.toString());
    for (size_t t = 0; t < c.thread_stacks.size(); ++t) {
      const auto& st = c.thread_stacks[t];
      fmt::format_to(o, "       {}: ", t < c.thread_names.size() ? c.thread_names[t] : "?");
      for (size_t k = 0; k < st.size() && k < kFramesShown; ++k) fmt::format_to(o, "{}{}", k ? " <- " : "", shortLabel(st[k]));
      if (st.size() > kFramesShown) fmt::format_to(o, " <- ...");
      fmt::format_to(o, "\n");
    }
  }
  if (r.stack_classes.size() > kClassesShown) fmt::format_to(o, "  ... {} more\n", r.stack_classes.size() - kClassesShown);
}

void writeGrid(Out o, const Report& r) {
  if (r.job.world_size <= 0 || r.job.world_size > kGridMaxRanks) return;
  const Verdict& v = r.verdict;
  fmt::format_to(o, "\nRank grid (letter = stack class, . = no stacks, * = culprit):\n");
  for (int row = 0; row < r.job.world_size; row += kGridColumns) {
    fmt::format_to(o, "{:6d}  ", row);
    for (int k = row; k < std::min(row + kGridColumns, r.job.world_size); ++k) {
      bool culprit = std::find(v.culprit_ranks.begin(), v.culprit_ranks.end(), k) != v.culprit_ranks.end();
      *o++ = culprit ? '*' : TextReportWriter::classLetter(r.rank_class[k]);
    }
    *o++ = '\n';
  }
}

}  // namespace

std::string TextReportWriter::write(const Report& r) {
  std::string text;
  Out o(text);
  if (r.job.stage == Stage::kSuspected) {
    for (const std::string& line : suspectSentences(r.job)) fmt::format_to(o, "{}\n", line);
    fmt::format_to(o, "\n");
  }
  writeVerdict(o, r);
  writeConfidence(o, r);
  writeActions(o, r.verdict);
  writeJob(o, r);
  writeStackClasses(o, r);
  writeGrid(o, r);
  return text;
}

}  // namespace hangwatch::verdict
