// The phrases every verdict's sentences are made of: ranks, links, suspects, gaps, attempts.
#include "hangwatch/verdict/verdict_wording.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <set>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/verdict/report.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "wording_text.h"

namespace hangwatch::verdict {
namespace wording {

// What a gap means for the sentence: "did not dump", "is still being collected", ...
std::pair<std::string, std::string> gapVerb(const DataGap& g) {
  const std::string& l = g.lacks;
  if (l == "no dump") return {"did not dump", "did not dump"};
  if (l.find("still being") != std::string::npos) return {"is still being collected", "are still being collected"};
  if (l.rfind("no watchdog snapshot", 0) == 0) return {"has no snapshot", "have no snapshot"};
  if (l.rfind("no forensics dump", 0) == 0) return {"has no forensics dump", "have no forensics dump"};
  if (l.rfind("no counter", 0) == 0) return {"has no counter for it", "have no counter for it"};
  return {"has no ring progress", "have no ring progress"};
}

// "AllReduce (1024 float)": a group's operation and shape.
std::string opShape(const OpGroup& g) {
  return g.op + (g.count ? fmt::format(" ({} {}{})", g.count, g.dtype.empty() ? "elements" : g.dtype,
                                       g.root ? fmt::format(", root {}", *g.root) : "")
                         : "");
}

// "1-3,7".
std::string ranksText(const std::vector<int>& ranks) {
  stackmerge::RankSet set;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int r : sorted) set.insert(r);
  return set.toString();
}

// "12.5 s".
std::string seconds(double s) { return fmt::format("{:.1f} s", s); }

// "AllReduce seq 7 on communicator 0x..".
bool isTransferOp(const std::string& op) { return op == "ncclSend" || op == "ncclRecv" || op == "ncclSendRecv"; }

std::string opText(const HangFocus& f) {
  if (isTransferOp(f.op)) return fmt::format("{} on communicator {}", f.op, f.comm);
  return fmt::format("{} seq {} on communicator {}", f.op.empty() ? std::string("collective") : f.op, f.seq, f.comm);
}

// "" when unknown.
// "GPU 2 on host h".
// A rank without a dump is placed by what a peer of its node wrote for it, if any.
std::string deviceText(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  const ExitedRank* e = job.exited(rank);
  auto placed = job.ranks_placed.find(rank);
  const RankPlace* m = placed != job.ranks_placed.end() ? &placed->second : nullptr;
  std::string host = s && !s->host.empty() ? s->host
                     : e && !e->host.empty() ? e->host
                     : m                     ? m->host
                                             : "unknown host";
  std::optional<int> device = s && s->device ? s->device : e ? e->device : m ? m->device : std::nullopt;
  std::string gpu = device ? fmt::format("GPU {}", *device) : "unknown GPU";
  return gpu + " on host " + host;
}

std::string missingRanksPlaced(const JobData& job, const std::vector<int>& ranks) {
  std::vector<std::string> placed;
  for (int r : ranks) {
    if (placed.size() == 8) break;  // a long list stays a range
    auto m = job.ranks_placed.find(r);
    const ExitedRank* e = job.exited(r);
    if (m != job.ranks_placed.end() || e) placed.push_back(describeRank(job, r));
  }
  if (placed.empty() || placed.size() < std::min<size_t>(ranks.size(), 8)) return "rank(s) " + ranksText(ranks);
  return placed.size() == ranks.size() ? fmt::format("{}", fmt::join(placed, "; "))
                                        : fmt::format("rank(s) {} ({}; ...)", ranksText(ranks), fmt::join(placed, "; "));
}

// "rank 5", "ranks 5 and 6", "ranks 4, 5 and 6"; long lists as compact ranges.
std::string ranksPhrase(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  if (ranks.size() > 6) return "ranks " + ranksText(ranks);
  std::string out = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ", ranks[i]);
  return out;
}

// "5 -> 6", "the link out of rank 5".
std::string linkText(const Link& l) {
  return l.to < 0 ? fmt::format("the link out of rank {}", l.from) : fmt::format("{} -> {}", l.from, l.to);
}

// "1 -> 2, 3 -> 4".
std::string linksText(const std::vector<Link>& links) {
  std::vector<std::string> texts;
  for (const Link& l : links) texts.push_back(linkText(l));
  return fmt::format("{}", fmt::join(texts, ", "));
}

// "1 -> 2, rank 3 or 4 -> 5": a suspect link by its connection, anything else by its text.
std::string suspectsText(const std::vector<Suspect>& suspects) {
  std::string out;
  for (size_t i = 0; i < suspects.size(); ++i) {
    const Suspect& s = suspects[i];
    fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "" : i + 1 == suspects.size() ? " or " : ", ",
                   s.link ? linkText(*s.link) : s.text);
  }
  return out;
}

// "ranks 5 and 6 did not dump", "rank 5 did not dump, rank 6 has no ring progress".
std::string gapsSentence(const std::vector<DataGap>& gaps) {
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<int>>> groups;
  for (const DataGap& g : gaps) {
    auto verb = gapVerb(g);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == verb; });
    if (it == groups.end()) groups.push_back({verb, {g.rank}});
    else it->second.push_back(g.rank);
  }
  std::string out;
  for (const auto& [verb, ranks] : groups)
    out += (out.empty() ? "" : ", ") + ranksPhrase(ranks) + " " + (ranks.size() == 1 ? verb.first : verb.second);
  return out;
}

// One sentence of what the profiler's progress shows.
std::string proxySummary(const ProxyFinding& pf) {
  auto first = [&](auto pred) -> const ProxyLinkState* {
    for (const ProxyLinkState& l : pf.links)
      if (pred(l)) return &l;
    return nullptr;
  };
  if (pf.link) {
    const ProxyLinkState* l =
        first([&](const ProxyLinkState& x) { return x.link == *pf.link && x.stall == ProxyStall::kOnTheWire; });
    if (l == nullptr) {
      if (const ProxyLinkState* c = first(
              [&](const ProxyLinkState& x) { return x.link == *pf.link && x.stall == ProxyStall::kCreditLost; }))
        return fmt::format("the connection {} lost a clear-to-send (channel {}: {})", linkText(*pf.link), c->channel,
                           c->detail);
    }
    return fmt::format("the connection {} holds steps on the wire{}", linkText(*pf.link),
                       l ? fmt::format(" (channel {}: {})", l->channel, l->detail) : "");
  }
  if (pf.rank && !pf.rank_evidence.empty()) return pf.rank_evidence;
  if (pf.rank) {
    return fmt::format(
        "rank {}'s GPU neither takes the steps that arrived nor fills the buffers it was given, while its "
        "neighbours' connections wait on it",
        *pf.rank);
  }
  std::vector<std::string> shown;
  for (const ProxyLinkState& l : pf.links) {
    if (l.stall == ProxyStall::kIdle || shown.size() >= 4) continue;
    shown.push_back(fmt::format("{} channel {} {} ({})", linkText(l.link), l.channel, proxyStallText(l.stall), l.detail));
  }
  return shown.empty() ? pf.note : fmt::format("{}", fmt::join(shown, "; "));
}

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace wording

using namespace wording;

std::string describeRank(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  std::string out = fmt::format("rank {}", rank);
  const ExitedRank* e = job.exited(rank);
  if (!s && e) {
    std::vector<std::string> inner{"no dump"};
    if (!e->host.empty()) inner.push_back("host " + e->host);
    if (e->device) inner.push_back(fmt::format("GPU {}", *e->device));
    if (e->pid) inner.push_back(fmt::format("pid {}", e->pid));
    return fmt::format("{} ({})", out, fmt::join(inner, ", "));
  }
  auto placed = job.ranks_placed.find(rank);
  if (!s && placed != job.ranks_placed.end()) {
    const RankPlace& m = placed->second;
    std::vector<std::string> inner{"no dump", "host " + m.host};
    if (m.device) inner.push_back(fmt::format("GPU {}", *m.device));
    if (m.pid) inner.push_back(fmt::format("pid {}", m.pid));
    return fmt::format("{} ({}; where it ran from its metrics)", out, fmt::join(inner, ", "));
  }
  if (!s) return out + " (no dump)";
  std::vector<std::string> inner;
  if (!s->host.empty()) inner.push_back("host " + s->host);
  // A process that drives several devices (one communicator rank each) names them all.
  std::set<int> devices;
  for (const SnapshotComm& c : s->comms)
    if (c.device >= 0 && c.state != "destroyed") devices.insert(c.device);
  if (devices.size() > 1) inner.push_back(fmt::format("GPUs {}", fmt::join(devices, ", ")));
  else if (s->device) inner.push_back(fmt::format("GPU {}", *s->device));
  if (s->pid) inner.push_back(fmt::format("pid {}", s->pid));
  if (s->launcher_rank) inner.push_back(fmt::format("process {}", *s->launcher_rank));
  return inner.empty() ? out : fmt::format("{} ({})", out, fmt::join(inner, ", "));
}

std::string missingDataText(MissingData m) {
  switch (m) {
    case MissingData::kNoDump: return "no dump";
    case MissingData::kStillCollecting: return "its dumps are still being collected";
    case MissingData::kNoCounter: return "no counter for this connection in its ring progress";
    case MissingData::kUnreadableCounter:
      return "no counter for this connection: its debugger could not read it (device memory, readable only by "
             "cuda-gdb)";
  }
  return "";
}

std::string threadText(const std::string& name, int64_t tid) {
  return name.empty() ? fmt::format("tid {}", tid) : name;
}

Suspect linkSuspect(const Link& l) {
  Suspect s;
  s.link = l;
  s.ranks = {l.from};
  if (l.to >= 0 && l.to != l.from) s.ranks.push_back(l.to);
  std::sort(s.ranks.begin(), s.ranks.end());
  s.text = l.to < 0 ? linkText(l) : fmt::format("link {}", linkText(l));
  return s;
}

Suspect rankSuspect(int rank, SuspectNote note) {
  const char* why = "";
  switch (note) {
    case SuspectNote::kNone: break;
    case SuspectNote::kNoSnapshot: why = " (no snapshot)"; break;
    case SuspectNote::kDebugger: why = " (debugger)"; break;
    case SuspectNote::kProfiler: why = " (profiler)"; break;
  }
  return Suspect{{rank}, std::nullopt, fmt::format("rank {}{}", rank, why), {}};
}

Suspect groupSuspect(const OpGroup& g) {
  return Suspect{g.ranks, std::nullopt, fmt::format("rank(s) {} in {}", ranksText(g.ranks), g.op), {}};
}

Suspect nodeSuspect(const std::vector<int>& ranks) {
  return Suspect{ranks, std::nullopt, fmt::format("{} (a link or GPU inside their node)", ranksPhrase(ranks)), {}};
}

std::string attemptText(const AttemptInfo& a) {
  std::string started;
  if (a.started_unix_s > 0) {
    std::time_t t = static_cast<std::time_t>(a.started_unix_s);
    std::tm utc{};
    gmtime_r(&t, &utc);
    started = fmt::format(", started {:%Y-%m-%d %H:%M:%S} UTC", utc);
  }
  std::string newest = a.number == a.count ? "the newest" : "not the newest";
  return fmt::format("attempt {} of {} ({}{}), {}; --attempt N reports another one", a.number, a.count,
                     a.name.empty() ? "unnamed" : a.name, started, newest);
}

std::vector<std::string> suspectSentences(const JobData& job) {
  std::vector<std::string> out;
  const SuspectSummary& s = job.suspect;
  out.push_back(fmt::format(
      "EARLY WARNING {}: GPU work stopped moving on rank {} while the job ran on. This verdict comes from the "
      "ranks' snapshots at the warning only: no debugger ran and nothing was paused; if the job does not move "
      "again, the hard timeout (HANGWATCH_TIMEOUT) makes the full dumps.",
      s.episode, job.trigger && job.trigger->rank ? fmt::format("{}", *job.trigger->rank) : std::string("?")));
  if (!s.resumed.empty()) {
    stackmerge::RankSet ranks;
    for (int r : s.resumed) ranks.insert(r);
    out.push_back(fmt::format("The job moved again: rank(s) {} resumed up to {:.1f} s after the warning; so far a "
                              "slow step, not a hang.",
                              ranks.toString(), s.resumed_after_s));
  }
  return out;
}

std::string nodeRole(const Verdict& v, const stackmerge::RankSet& node_ranks) {
  std::vector<std::string> roles;
  if (v.culprit_link) {
    const bool from = node_ranks.contains(v.culprit_link->from), to = node_ranks.contains(v.culprit_link->to);
    if (from || to)
      roles.push_back(fmt::format("culprit link {} -> {} {}", v.culprit_link->from, v.culprit_link->to,
                                  from && to ? "inside this node" : from ? "leaves this node" : "enters this node"));
  } else {
    std::vector<int> here;
    for (int r : v.culprit_ranks)
      if (node_ranks.contains(r)) here.push_back(r);
    if (!here.empty()) roles.push_back(fmt::format("culprit rank(s) {}", fmt::join(here, ",")));
  }
  for (const Suspect& s : v.suspects) {
    const bool involved = s.link ? node_ranks.contains(s.link->from) || (s.link->to >= 0 && node_ranks.contains(s.link->to))
                                 : std::any_of(s.ranks.begin(), s.ranks.end(), [&](int r) { return node_ranks.contains(r); });
    if (involved) roles.push_back("suspect: " + s.text);
  }
  return fmt::format("{}", fmt::join(roles, "; "));
}

}  // namespace hangwatch::verdict
