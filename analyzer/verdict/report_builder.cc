#include "hangwatch/verdict/report_builder.h"

#include <algorithm>
#include <map>
#include <set>

#include "hangwatch/verdict/verdict_maker.h"

namespace hangwatch::verdict {
namespace {

// Ring order of the focus communicator from channel 0's prev/next, else comm rank order.
std::vector<int> ringOrder(const Report& r, const SequenceAnalysis& seq) {
  std::vector<int> order;
  if (!r.focus) return order;
  const std::string& comm = r.focus->comm;
  std::map<int, int> next;
  int size = 0;
  for (const RankSummary& s : r.job.ranks) {
    for (const SnapshotComm& c : s.comms) {
      if (c.hash == comm) size = std::max(size, c.size);
    }
    for (const RingProgress& p : s.ring_progress) {
      if (p.comm == comm && p.channel == 0 && p.next >= 0) next[p.rank] = p.next;
    }
  }
  if (size <= 0) return order;
  std::set<int> seen;
  if (static_cast<int>(next.size()) == size) {
    for (int cr = 0; static_cast<int>(order.size()) < size && !seen.count(cr);) {
      seen.insert(cr);
      order.push_back(seq.globalRank(comm, cr));
      auto it = next.find(cr);
      if (it == next.end()) break;
      cr = it->second;
    }
    if (static_cast<int>(order.size()) == size) return order;
    order.clear();
  }
  for (int cr = 0; cr < size; ++cr) order.push_back(seq.globalRank(comm, cr));
  return order;
}

std::vector<NodeRanks> nodesOf(const JobData& job) {
  std::vector<NodeRanks> nodes;
  std::map<std::string, size_t> index;
  for (const RankSummary& s : job.ranks) {  // ascending: nodes come in the order of their first rank
    if (s.host.empty()) continue;
    auto [it, fresh] = index.try_emplace(s.host, nodes.size());
    if (fresh) nodes.push_back({s.host, {}});
    nodes[it->second].ranks.insert(s.rank);
  }
  return nodes;
}

void nameSuspectHosts(Verdict& v, const JobData& job) {
  for (Suspect& s : v.suspects) {
    std::vector<int> ranks = s.ranks;
    if (s.link) ranks = s.link->to >= 0 ? std::vector<int>{s.link->from, s.link->to} : std::vector<int>{s.link->from};
    for (int r : ranks) {
      std::string h = hostOf(job, r);
      if (!h.empty() && std::find(s.hosts.begin(), s.hosts.end(), h) == s.hosts.end()) s.hosts.push_back(h);
    }
  }
}

}  // namespace

std::string hostOf(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  return s ? s->host : "";
}

std::string hostsText(const Suspect& s) {
  std::string out;
  for (const std::string& h : s.hosts) out += (out.empty() ? "" : s.link ? " -> " : ", ") + h;
  return out;
}

Report ReportBuilder::build(JobData job) {
  Report r;
  r.job = std::move(job);
  stackmerge::StackClassifier classifier;
  for (const RankSummary& s : r.job.ranks) {
    if (s.has_forensics && !s.threads.empty()) classifier.addRank(s.rank, s.threads, *r.job.stacks);
  }
  r.stack_classes = classifier.classes();
  r.rank_class.assign(r.job.world_size, -1);
  for (size_t i = 0; i < r.stack_classes.size(); ++i) {
    for (const auto& [first, last] : r.stack_classes[i].ranks.intervals()) {
      for (int k = first; k <= last; ++k) {
        if (k >= 0 && k < r.job.world_size) r.rank_class[k] = static_cast<int>(i);
      }
    }
  }
  VerdictMaker maker(r.job, r.stack_classes);
  r.verdict = maker.decide();
  r.focus = maker.sequences().focus();
  r.ring_order = ringOrder(r, maker.sequences());
  r.nodes = nodesOf(r.job);
  nameSuspectHosts(r.verdict, r.job);
  return r;
}

}  // namespace hangwatch::verdict
