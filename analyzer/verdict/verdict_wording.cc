#include "hangwatch/verdict/verdict_wording.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <fmt/chrono.h>
#include <fmt/ranges.h>
#include <ctime>

#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/report.h"

namespace hangwatch::verdict {
namespace {

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
  return g.op + (g.count ? fmt::format(" ({} {})", g.count, g.dtype.empty() ? "elements" : g.dtype) : "");
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
std::string opText(const HangFocus& f) {
  return fmt::format("{} seq {} on communicator {}", f.op.empty() ? std::string("collective") : f.op, f.seq, f.comm);
}

// "" when unknown.
// "GPU 2 on host h".
std::string deviceText(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  std::string host = s && !s->host.empty() ? s->host : "unknown host";
  std::string gpu = s && s->device ? fmt::format("GPU {}", *s->device) : "unknown GPU";
  return gpu + " on host " + host;
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

}  // namespace

std::string describeRank(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  std::string out = fmt::format("rank {}", rank);
  if (!s) return out + " (no dump)";
  std::vector<std::string> inner;
  if (!s->host.empty()) inner.push_back("host " + s->host);
  if (s->device) inner.push_back(fmt::format("GPU {}", *s->device));
  if (s->pid) inner.push_back(fmt::format("pid {}", s->pid));
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
  return Suspect{{rank}, std::nullopt, fmt::format("rank {}{}", rank, why)};
}

Suspect groupSuspect(const OpGroup& g) {
  return Suspect{g.ranks, std::nullopt, fmt::format("rank(s) {} in {}", ranksText(g.ranks), g.op)};
}

Suspect nodeSuspect(const std::vector<int>& ranks) {
  return Suspect{ranks, std::nullopt, fmt::format("{} (a link or GPU inside their node)", ranksPhrase(ranks))};
}

std::string VerdictWording::rankIn(const std::string& comm, int rank) const {
  if (!sequences_.sharedByProcess(comm)) return describeRank(job_, rank);
  const RankSummary* owner = nullptr;
  const SnapshotComm* c = sequences_.commEntry(comm, rank, &owner);
  std::string out = fmt::format("rank {}", rank);
  if (!c || !owner) return out;
  return fmt::format("{} (GPU {} of pid {}{})", out, c->device, owner->pid,
                     owner->host.empty() ? "" : " on host " + owner->host);
}

std::string VerdictWording::who(const std::string& comm, int rank) const {
  return sequences_.sharedByProcess(comm) ? rankIn(comm, rank)
                                          : fmt::format("rank {} ({})", rank, deviceText(job_, rank));
}

std::string VerdictWording::channels(const Verdict& v, const RingFacts& facts) const {
  const std::string kind = v.source == "profiler" ? " channel(s) with network connections"
                           : facts.graph         ? " " + facts.graph->algorithm + " channel(s)"
                                                 : " ring channel(s)";
  return fmt::format("{} of {}{}", facts.ring.channels_agree, facts.ring.channels_total, kind);
}

// " (it reached step 4, the next-least connection step 9)" from a channel naming the culprit.
std::string VerdictWording::steps(const RingFinding& rf) const {
  for (const ChannelFinding& c : rf.channels) {
    if ((rf.link && c.link && *c.link == *rf.link) || (rf.rank && c.rank && *c.rank == *rf.rank))
      return fmt::format(" (it reached step {}, the next-least connection step {})", c.least_progress, c.next_least);
  }
  return "";
}

void VerdictWording::ringWaiting(Verdict& v, const RingFacts& facts) const {
  const HangFocus& f = facts.focus;
  const CommPositions& p = facts.positions;
  const OpGroup* g = p.groups.empty() || !p.groups.front().count ? nullptr : &p.groups.front();
  v.evidence.push_back(fmt::format("Rank(s) {} {}wait in {}{}; none is behind or in another collective.",
                                   ranksText(facts.waiting), p.finished.empty() ? "all " : "", opText(f),
                                   g ? fmt::format(" ({} {})", g->count, g->dtype) : ""));
  for (int r : p.finished) {
    auto it = p.last_issued.find(r);
    const bool later = it != p.last_issued.end() && it->second && *it->second > f.seq;
    v.evidence.push_back(fmt::format(
        "{} finished it{}: a rank whose sends fit in its peer's buffers completes a collective its peers still "
        "wait in, so it is no culprit by itself.",
        describeRank(job_, r), later ? fmt::format(" and went on (last issued seq {})", *it->second) : ""));
  }
  for (int r : p.in_host_call) {
    v.evidence.push_back(fmt::format("{} has a host thread still blocked inside the {} call itself.",
                                     describeRank(job_, r), f.op.empty() ? std::string("collective") : f.op));
  }
}

void VerdictWording::ringProfilerView(Verdict& v, const RingFacts& facts, ProfilerView view) const {
  const std::string where = ranksPhrase(facts.proxy.narrowed);
  switch (view) {
    case ProfilerView::kSame:
      v.evidence.push_back("NCCL's profiler events in the snapshots show the same: " + proxySummary(facts.proxy) + ".");
      return;
    case ProfilerView::kNarrowedAgrees:
      v.evidence.push_back("NCCL's profiler events in the snapshots agree: its network connections put the stop "
                           "among " + where + ", whose links inside the node only the debugger reads.");
      return;
    case ProfilerView::kNarrowedDisagrees:
      v.hinges_on = "which source is right: NCCL's profiler events put the stop among " + where;
      v.evidence.push_back("NCCL's profiler events in the snapshots put the stop among " + where +
                           " instead: " + proxySummary(facts.proxy) + ".");
      return;
  }
}

void VerdictWording::ringLinkCulprit(Verdict& v, const RingFacts& facts) const {
  const Link& l = *facts.ring.link;
  linkCulprit(v, facts.focus, l);
  if (v.source == "profiler") {
    v.evidence.push_back(fmt::format("From NCCL's profiler events in the snapshots (no debugger): on {} {}.",
                                     channels(v, facts), proxySummary(facts.proxy)));
  } else if (facts.ring.credit_lost) {
    v.evidence.push_back(fmt::format(
        "On {} rank {} took every step rank {} posted and waits for the next, while rank {} waits for a "
        "clear-to-send for a slot rank {} already freed: the credit was lost on the link, neither GPU stopped.",
        channels(v, facts), l.to, l.from, l.from, l.to));
  } else {
    v.evidence.push_back(fmt::format("On {} the connection {} -> {} made the least progress{}.", channels(v, facts),
                                     l.from, l.to, steps(facts.ring)));
  }
}

// Headline and next steps of a culprit link, whatever evidence named it.
void VerdictWording::linkCulprit(Verdict& v, const HangFocus& f, const Link& l) const {
  v.headline = fmt::format("Communication hang: the link from {} to {} stopped delivering during {}.", who(f.comm, l.from),
                           who(f.comm, l.to), opText(f));
  std::string a = hostOf(job_, l.from), b = hostOf(job_, l.to);
  std::string hosts = a == b || b.empty() ? "host " + (a.empty() ? std::string("?") : a) : "hosts " + a + " and " + b;
  v.next_steps.push_back(fmt::format(
      "Test the link {} -> {} (nccl-tests between these two GPUs; NVLink / InfiniBand error counters).",
      deviceText(job_, l.from), deviceText(job_, l.to)));
  v.next_steps.push_back("Drain " + hosts + " (or exclude that link) and restart the job from the last checkpoint.");
}

// Next steps for a culprit rank, whatever evidence named it.
void VerdictWording::rankCulpritSteps(Verdict& v, int rank) const {
  std::string host = hostOf(job_, rank);
  v.next_steps.push_back(fmt::format("Check {} (nvidia-smi, dmesg for Xid errors).", deviceText(job_, rank)));
  v.next_steps.push_back(fmt::format("Drain host {} and restart the job from the last checkpoint.",
                                     host.empty() ? fmt::format("of rank {}", rank) : host));
}

void VerdictWording::ringRankCulprit(Verdict& v, const RingFacts& facts) const {
  const HangFocus& f = facts.focus;
  const RingFinding& rf = facts.ring;
  const int rank = *rf.rank;
  v.headline = fmt::format("Communication hang: {} stopped making progress inside {}; its neighbours wait on it.",
                           who(f.comm, rank), opText(f));
  if (v.source == "profiler") {
    v.evidence.push_back(fmt::format("From NCCL's profiler events in the snapshots (no debugger): {}{}.",
                                     facts.proxy.rank_evidence.empty() ? "on " + channels(v, facts) + " " : std::string(),
                                     proxySummary(facts.proxy)));
  } else if (rf.channels_agree > 0) {
    v.evidence.push_back(fmt::format(
        "On {} both ring connections of rank {} (in from its prev, out to its next) made the least progress{}.",
        channels(v, facts), rank, steps(rf)));
  }
  if (!job_.find(rank)) {
    v.evidence.push_back(fmt::format(
        "Rank {} left no dump, so whether it is stuck inside the collective or elsewhere is unknown.", rank));
  }
  rankCulpritSteps(v, rank);
}

void VerdictWording::ringInconclusive(Verdict& v, const RingFacts& facts) const {
  const ProxyFinding& pf = facts.proxy;
  const std::vector<int>& missing = facts.positions.members_missing;
  switch (facts.gap) {
    case RingGap::kMembersMissing:
      v.reason = fmt::format(
          "every rank that answered waits in the collective, and rank(s) {} of the communicator left no snapshot: the "
          "culprit is most likely among them",
          ranksText(missing));
      v.hinges_on = fmt::format("the dumps of {}", ranksPhrase(missing));
      v.next_steps.push_back(
          fmt::format("Look at rank(s) {} directly (their logs, their hosts); they did not dump.", ranksText(missing)));
      break;
    case RingGap::kNarrowedByProfiler: {
      const std::string hosts = fmt::format("{}", fmt::join(pf.narrowed_hosts, ", "));
      v.reason = "every rank waits in the same collective; NCCL's profiler has no per-link data for links inside a "
                 "node (P2P, SHM, NVLink), and its network connections narrow the fault to " +
                 ranksPhrase(pf.narrowed) + " on host(s) " + hosts;
      v.hinges_on = "per-link ring progress inside the node, which only the debugger phase reads";
      v.evidence.push_back("From NCCL's profiler events in the snapshots (no debugger): " + proxySummary(pf) + ".");
      if (!pf.ring_order_evidence.empty()) {
        v.evidence.push_back(
            fmt::format("On a ring a rank after the stop can send only what reached it, one chunk more per hop: {}.",
                        fmt::join(pf.ring_order_evidence, "; ")));
      }
      v.next_steps.push_back("Run the collector's debugger phase (HANGWATCH_COLLECT=1, the default) for per-link "
                             "progress inside the node, or run nccl-tests between the GPUs of host(s) " + hosts + ".");
      break;
    }
    case RingGap::kNoRecords:
      v.reason = "every rank waits in the same collective and no rank has ring progress records "
                 "(the collector's debugger phase did not run or failed), so the faulty link or rank cannot be told";
      if (!pf.note.empty()) v.reason += "; NCCL's profiler cannot tell either: " + pf.note;
      if (!pf.members_host.empty())
        v.reason += fmt::format("; all of the communicator's ranks run on host {}, so the fault is a GPU or a link "
                                "inside that node",
                                pf.members_host);
      if (!pf.every_node.empty())
        v.evidence.push_back(
            "NCCL's profiler events bound a stop in every node of the communicator (the network senders of each "
            "node wait at their GPUs): one stop in each node and a single stop that starves them all look the same "
            "from the network, so each node is a suspect; per-link progress inside the nodes (the debugger phase) "
            "tells them apart.");
      v.hinges_on = "ring progress, which no rank has";
      v.next_steps.push_back("Look at ranks/rNNNNN.collect.log for why the debugger phase failed; run "
                             "forensics collect by hand on two neighbouring ranks while the job still hangs.");
      break;
    case RingGap::kNamesNothing:
    case RingGap::kNone:
      v.reason = "every rank waits in the same collective and ring progress names no single link or rank (" +
                 facts.ring.note + ")";
      v.next_steps.push_back("Run nccl-tests on the hosts of this communicator to find the faulty link.");
      break;
  }
  v.headline = "Inconclusive: " + v.reason + ".";
}

void VerdictWording::noDumps(Verdict& v, EmptyJob what) const {
  switch (what) {
    case EmptyJob::kTriggeredNoDumps:
      v.reason = "TRIGGER.json exists but no rank left a usable dump";
      v.headline = fmt::format("Inconclusive: {}.", v.reason);
      v.evidence.push_back(fmt::format("TRIGGER.json: reason {} on host {}.", job_.trigger->reason, job_.trigger->host));
      v.next_steps.push_back("Check that every rank can write to the dump directory and look at the ranks' stderr.");
      return;
    case EmptyJob::kNoSnapshotDumped:
      v.reason = job_.trigger_problem;
      v.headline = v.kind == VerdictKind::kNoHang
                       ? "No hang: no watchdog detected one (no TRIGGER.json, no rank dumps)."
                       : fmt::format("Inconclusive: {} and no rank dumped.", job_.trigger_problem);
      v.evidence.push_back(
          fmt::format("{} rank(s) wrote metrics windows; no rank wrote a hang snapshot.", job_.metrics_files));
      v.next_steps.push_back(
          "Nothing to do for a hang. If the job is slow rather than stuck, run forensics analyze on this directory.");
      return;
    case EmptyJob::kNothing:
      v.reason = "the job directory holds no TRIGGER.json, no rank dumps and no metrics";
      v.headline = fmt::format("Inconclusive: {}.", v.reason);
      v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and this HANGWATCH_DUMP_DIR / "
                             "HANGWATCH_JOB_ID.");
      return;
  }
}

void VerdictWording::noSnapshots(Verdict& v) const {
  v.reason = "no rank's watchdog snapshot could be read, so sequence numbers and pending operations are unknown";
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.hinges_on = "the watchdog snapshots, which no rank left";
  v.next_steps.push_back("Check that the job ran with LD_PRELOAD=libhangwatch.so and that ranks/*.watchdog.json "
                         "are complete; then run forensics report again.");
}

void VerdictWording::nothingPending(Verdict& v) const {
  const std::string why = job_.trigger ? fmt::format("TRIGGER.json (reason {}) made {} rank(s) dump, but",
                                                     job_.trigger->reason, job_.ranks.size())
                                       : fmt::format("{} rank(s) dumped, but", job_.ranks.size());
  v.headline = "No hang: no rank has an operation pending or a thread blocked in NCCL.";
  v.evidence.push_back(fmt::format("{} no rank has a pending operation or a thread blocked in an NCCL call: any stall "
                                   "had cleared when they dumped.",
                                   why));
  v.next_steps.push_back("Nothing to do. If the job is slow rather than stuck, run forensics analyze on this directory.");
}

void VerdictWording::outsideCollectives(Verdict& v, const std::vector<OverdueOp>& stuck) const {
  for (const OverdueOp& o : stuck) {
    v.evidence.push_back(fmt::format("{} has {} pending for {} (timeout {}).", describeRank(job_, o.rank), o.op,
                                     seconds(o.age_s), seconds(o.timeout_s)));
  }
  if (stuck.empty()) {
    v.reason = "operations are pending but none is a collective and none is older than the timeout";
    v.headline = fmt::format("Inconclusive: {}.", v.reason);
    return;
  }
  const std::string ranks = ranksText(v.culprit_ranks);
  v.headline =
      fmt::format("Non-communication hang: rank(s) {} wait on a GPU operation outside any collective.", ranks);
  v.next_steps.push_back(fmt::format(
      "Check the GPU(s) of rank(s) {} (nvidia-smi, dmesg for Xid errors) and the kernel named above; drain the host "
      "if the GPU is faulty.",
      ranks));
}

void VerdictWording::notFormed(Verdict& v, const FormingComm& c) const {
  const std::string what = fmt::format("the {}-rank communicator {}", c.size, c.comm);
  v.evidence.push_back(fmt::format("Rank(s) {} are inside {} for {}, the oldest for {}; NCCL returns from it on no "
                                   "member until every member has called it.",
                                   ranksText(c.waiting), c.call, what, seconds(c.oldest_s)));
  if (c.absent.empty()) {
    v.reason = fmt::format("every member of {} is inside {}: its bootstrap does not complete", what, c.call);
    v.headline = fmt::format("Inconclusive: {}.", v.reason);
    v.next_steps.push_back(
        "Check the network between the hosts (the bootstrap's TCP connections, NCCL_SOCKET_IFNAME) and that every "
        "rank was given the same unique id; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP shows where it stops.");
    return;
  }
  std::vector<int> absent = c.absent;
  v.evidence.push_back(fmt::format("No snapshot shows the communicator's rank(s) {} inside the call.",
                                   ranksText(absent)));
  for (int r : c.whole_job ? c.outside : std::vector<int>{}) {
    const RankSummary* s = job_.find(r);
    std::string pending;
    for (const SnapshotPendingOp& op : s ? s->pending : std::vector<SnapshotPendingOp>{})
      if (pending.size() < 80) pending += (pending.empty() ? "" : ", ") + op.op;
    v.evidence.push_back(describeRank(job_, r) + ": not inside " + c.call + (s && s->comms.empty() ? ", no communicator made" : "") +
                         "; " + (pending.empty() ? "no GPU work pending, so it is in host code." : "pending on its streams: " + pending + "."));
  }
  for (const ExitedRank& e : job_.ranks_exited)
    if (std::count(c.exited.begin(), c.exited.end(), e.rank))
      v.evidence.push_back(fmt::format("Rank {}'s process (pid {} on {}) had exited when rank {} of its node dumped: "
                                       "it can never join.",
                                       e.rank, e.pid, e.host, e.seen_by));
  if (!c.silent.empty())
    v.evidence.push_back(ranksPhrase(c.silent) + " left no snapshot: " + (c.silent.size() == 1 ? "it" : "they") +
                         " may be inside it or not have called it either.");
  if (!v.culprit_ranks.empty()) {
    v.headline = fmt::format("Non-communication hang: rank(s) {} never called {} for {}, which rank(s) {} wait in.",
                             ranksText(v.culprit_ranks), c.call, what, ranksText(c.waiting));
    if (!c.outside.empty())
      v.next_steps.push_back("Not a network or GPU fault: rank(s) " + ranksText(c.outside) +
                             " never reached the communicator's creation (see where below: a data loader, a lock, a "
                             "loop, a different code path). Fix the program or its input and restart; draining hosts "
                             "will not help.");
    if (!c.exited.empty())
      v.next_steps.push_back("Find why rank(s) " + ranksText(c.exited) +
                             " died before joining: the job's log of that rank, dmesg on its host for the OOM killer, a "
                             "core file.");
    return;
  }
  if (c.whole_job) {
    v.hinges_on = fmt::format("the snapshots of rank(s) {}: inside {} or not", ranksText(c.silent), c.call);
    v.headline = fmt::format("Non-communication hang, not confident: {} waits for rank(s) {}, which left no snapshot.",
                             what, ranksText(c.silent));
  } else {
    v.reason = fmt::format("{} waits for {} member(s) and the snapshots do not tie members of it to processes",
                           what, absent.size());
    v.hinges_on = "which processes are the communicator's missing members";
    v.headline = fmt::format("Inconclusive: {}; the ranks outside it are suspects.", v.reason);
  }
  v.next_steps.push_back("Look at where the suspect ranks are (their stacks below, or py-spy dump on their hosts): "
                         "the member that never called init is in host code.");
}

void VerdictWording::exitedInside(Verdict& v, const HangFocus& f, const std::vector<ExitedRank>& exited) const {
  std::vector<std::string> said;
  for (const ExitedRank& e : exited)
    said.push_back(fmt::format("Rank {}'s process (pid {} on {}) had exited when rank {} of its node dumped{}; {} can "
                               "never complete without it.",
                               e.rank, e.pid, e.host, e.seen_by, e.note.empty() ? "" : " (" + e.note + ")",
                               opText(f)));
  v.evidence.insert(v.evidence.begin(), said.begin(), said.end());
  v.headline = fmt::format("Communication hang: rank(s) {} exited; the others wait for {} in {}.",
                           ranksText(v.culprit_ranks), exited.size() == 1 ? "it" : "them", opText(f));
  v.next_steps.clear();
  v.next_steps.push_back(fmt::format(
      "Find why rank(s) {} died: the job's log of that rank (a Python traceback, an assertion), dmesg on its host for "
      "the OOM killer or an Xid error, a core file. Then restart from the last checkpoint.",
      ranksText(v.culprit_ranks)));
}

void VerdictWording::heldInInit(Verdict& v, const std::vector<int>& ranks) const {
  std::vector<int> held = ranks;
  v.evidence.push_back(fmt::format("{} never called it either, but {} inside ncclCommInitRank for another "
                                   "communicator, waiting for its other members: held up, not a culprit.",
                                   ranksPhrase(held), held.size() == 1 ? "is" : "are"));
}

void VerdictWording::tooFewAnswered(Verdict& v, int answered, bool named) const {
  const std::string partial = named ? fmt::format(" (the partial data points to: {})", v.headline) : "";
  v.reason = fmt::format("too few ranks answered: {} of {}", answered, job_.world_size);
  v.evidence.insert(v.evidence.begin(),
                    fmt::format("Only {} of {} ranks left a usable dump{}.", answered, job_.world_size, partial));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.hinges_on = fmt::format("the dumps of the {} rank(s) that left none", job_.world_size - answered);
}

void VerdictWording::dataNotes(Verdict& v) const {
  if (job_.trigger) {
    const TriggerRecord& t = *job_.trigger;
    const std::string who = t.rank ? fmt::format("rank {}", *t.rank) : std::string("a manual trigger");
    const std::string what =
        t.stuck_op ? fmt::format(": {}{} pending for {}", t.stuck_op->op,
                                 t.stuck_op->seq ? fmt::format(" seq {}", *t.stuck_op->seq) : "",
                                 seconds(t.stuck_op->age_s))
                   : "";
    v.evidence.push_back(fmt::format("First detected by {} on host {} ({}){}.", who, t.host, t.reason, what));
  }
  if (!job_.ranks_missing.empty()) {
    v.evidence.push_back(fmt::format("Rank(s) {} left no usable dump; the verdict uses the other {}.",
                                     ranksText(job_.ranks_missing), job_.ranks.size()));
  }
  if (!job_.ranks_collecting.empty()) {
    v.evidence.push_back(fmt::format("Rank(s) {} were still being collected when this report was made: run it again "
                                     "(forensics report --wait) for their data.",
                                     ranksText(job_.ranks_collecting)));
  }
}

void VerdictWording::sourcesDisagree(Verdict& v, const RingFinding& rf, const ProxyFinding& pf) const {
  auto name = [](const std::optional<Link>& l, const std::optional<int>& r) {
    return l ? fmt::format("link {}", linkText(*l)) : fmt::format("rank {}", *r);
  };
  v.reason = fmt::format(
      "the two sources of ring progress disagree: the debugger's records name {}, NCCL's profiler events name {}",
      name(rf.link, rf.rank), name(pf.link, pf.rank));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.hinges_on = "which source is right: the debugger reads the ring as it stands, the profiler as NCCL's proxy last saw it";
  v.evidence.push_back(fmt::format("From NCCL's profiler events in the snapshots: {}.", proxySummary(pf)));
  v.next_steps.push_back("Test both suspects (nccl-tests between those GPUs; NVLink / InfiniBand error counters) "
                         "before draining anything.");
}

void VerdictWording::unseenLinks(Verdict& v, const RingFinding& rf, const std::vector<int>& dark) const {
  std::string seen;
  if (rf.link) {
    seen = fmt::format("least progress on {} among ranks with data", linkText(*rf.link));
  } else if (rf.rank) {
    seen = fmt::format("rank {}'s connections made the least progress among ranks with data", *rf.rank);
  } else {
    seen = rf.least_seen.empty() ? "no connection reported by ranks with data stands out"
                                 : fmt::format("least progress among ranks with data on {}", linksText(rf.least_seen));
  }
  const std::string unseen = linksText(rf.unseen);
  std::vector<std::string> lacks;
  for (const DataGap& g : v.lacking_data) lacks.push_back(fmt::format("{}: {}", g.rank, g.lacks));
  v.evidence.push_back(fmt::format(
      "No rank reported the connection(s) {}: both ends lack ring progress ({}), so any of them may have made less "
      "progress than what was seen.",
      unseen, fmt::join(lacks, "; ")));
  v.hinges_on = fmt::format("ring progress of {}, which would show {}", ranksPhrase(dark), unseen);
  v.reason = fmt::format("{}; {}: suspect {}", seen, gapsSentence(v.lacking_data), suspectsText(v.suspects));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  // Advice drawn from one culprit (drain its hosts) would act on a guess.
  v.next_steps = {fmt::format("Get the missing data: run forensics report again once {} finished collecting (report "
                              "--wait), or look at them directly (their logs, their hosts).",
                              ranksPhrase(dark)),
                  "Test each suspect (nccl-tests between those GPUs; NVLink / InfiniBand error counters) before "
                  "draining anything."};
}

void VerdictWording::otherAlgorithms(Verdict& v, const RingFacts& facts, bool hedged) const {
  std::set<std::string> all(facts.proxy.other_algorithms.begin(), facts.proxy.other_algorithms.end());
  all.insert(facts.kernel_algorithms.begin(), facts.kernel_algorithms.end());
  const std::string algos = fmt::format("{}", fmt::join(all, " and "));
  if (!facts.kernel_algorithms.empty())
    v.evidence.push_back(fmt::format(
        "The debugger found the hung kernels on communicator {} running {} (their device function), not a ring: a "
        "tree's or PAT's connections do not stop the way a ring's do.",
        facts.focus.comm, fmt::join(facts.kernel_algorithms, " and ")));
  if (!facts.proxy.other_algorithms.empty())
    v.evidence.push_back(fmt::format(
        "NCCL launched {} collective(s) on communicator {} since the stuck one was issued (its profiler's Coll "
        "events): the stuck collective, or one queued behind it, may not run on a ring, and a tree's or PAT's "
        "connections do not stop the way a ring's do.",
        fmt::join(facts.proxy.other_algorithms, " and "), facts.focus.comm));
  if (!hedged) return;
  v.hinges_on = fmt::format(
      "which algorithm the stuck collective ran: the culprit was read off the ring's connections, which {} does not "
      "use the same way",
      algos);
  v.reason = fmt::format("least ring progress named {}, but NCCL ran {} on this communicator", suspectsText(v.suspects),
                         algos);
  v.headline = fmt::format("Inconclusive: {}; suspect {}.", v.reason, suspectsText(v.suspects));
  v.next_steps = {
      std::string("Rerun the failing step with NCCL_ALGO=Ring (or read the algorithm NCCL_DEBUG=INFO logs for this "
                  "collective): on a ring the same evidence names the culprit."),
      "Test each suspect (nccl-tests between those GPUs; NVLink / InfiniBand error counters) before draining anything."};
}

void VerdictWording::graphLinkCulprit(Verdict& v, const RingFacts& facts) const {
  const GraphStop& s = *facts.graph->stop;
  const Link& l = *s.link;
  linkCulprit(v, facts.focus, l);
  std::string why;
  switch (s.kind) {
    case GraphStop::Kind::kDataLost:
      why = fmt::format("rank {} posted {} step(s) of this collective on it that rank {} never saw ({} arrived), and "
                        "rank {} waits for them",
                        l.from, s.posted, l.to, s.delivered, l.to);
      break;
    case GraphStop::Kind::kCreditLost:
      why = fmt::format("rank {} took every step rank {} posted and waits for the next, while rank {} waits for a "
                        "clear-to-send for a slot rank {} already freed: the credit was lost on the link",
                        l.to, l.from, l.from, l.to);
      break;
    default:
      why = fmt::format("rank {} waits for data from rank {}, which finished its part of the collective (it posted "
                        "everything): the data was lost on the link",
                        l.to, l.from);
      break;
  }
  v.evidence.push_back(fmt::format("On {} every wait on the {}'s connections (parents, children, peers) ends at the "
                                   "link {} -> {}: {}.",
                                   channels(v, facts), facts.graph->algorithm, l.from, l.to, why));
}

void VerdictWording::graphRankCulprit(Verdict& v, const RingFacts& facts) const {
  const HangFocus& f = facts.focus;
  const int rank = *facts.ring.rank;
  v.headline = fmt::format("Communication hang: {} stopped making progress inside {}; its peers wait on it.",
                           who(f.comm, rank), opText(f));
  v.evidence.push_back(fmt::format(
      "On {} every wait on the {}'s connections ends at rank {}: its peers wait on it for data or for a free slot, "
      "and none of its own threads waits on any connection, so its GPU stopped inside the collective.",
      channels(v, facts), facts.graph->algorithm, rank));
  rankCulpritSteps(v, rank);
}

void VerdictWording::graphRead(Verdict& v, const RingFacts& facts) const {
  v.evidence.push_back(fmt::format(
      "NCCL ran {} on communicator {}: the debugger read every connection of the collective on that algorithm's "
      "graph (each rank's parent and children, or peers), not a ring.",
      facts.graph->algorithm.empty() ? std::string("another algorithm than RING") : facts.graph->algorithm,
      facts.focus.comm));
}

namespace {
std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}
}  // namespace

void VerdictWording::linkEndSilent(Verdict& v, const Link& link, const std::vector<int>& silent) const {
  const std::string who = ranksPhrase(silent);
  v.evidence.push_back(fmt::format(
      "{} wrote no snapshot. A sender whose receiver's host or process died waits with its data handed to the "
      "network as it does on a dead link (over sockets NCCL's send only queues), so the link {} and {} are both "
      "suspects.",
      capitalized(who), linkText(link), who));
  v.hinges_on = fmt::format("{}'s snapshot: whether its host and process are alive and took the data", who);
  v.reason = fmt::format("the link {} stopped delivering, but {} wrote no snapshot: suspect {}", linkText(link), who,
                         suspectsText(v.suspects));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.next_steps = {fmt::format("Look at {} first: is its host up, did its process exit or crash (its log, dmesg)?", who),
                  fmt::format("If it is alive, test the link {} (nccl-tests between those GPUs; NVLink / InfiniBand "
                              "error counters) before draining anything.",
                              linkText(link))};
}

void VerdictWording::culpritWithoutSnapshot(Verdict& v, int rank) const {
  v.hinges_on =
      fmt::format("rank {}'s snapshot: whether its GPU stopped inside the collective or it never called it", rank);
}

void VerdictWording::whereCulpritsAre(Verdict& v) const {
  std::set<int> said;
  for (const CulpritStack& c : v.where) {
    if (c.frames.empty() || !said.insert(c.rank).second) continue;
    const size_t shown = std::min<size_t>(c.frames.size(), 4);
    v.evidence.push_back(fmt::format("Rank {} thread {} is in {}.", c.rank, c.thread,
                                     fmt::join(c.frames.begin(), c.frames.begin() + shown, " <- ")));
  }
}

void VerdictWording::mismatch(Verdict& v, const HangFocus& f, const CommPositions& p, const std::vector<int>& odd) const {
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const OpGroup& g = p.groups[i];
    std::string who = "rank(s) " + ranksText(g.ranks) + " are";
    if (i > 0 && g.ranks.size() <= 4) {
      who.clear();
      for (int r : g.ranks) who += (who.empty() ? "" : ", ") + describeRank(job_, r);
      who += g.ranks.size() == 1 ? " is" : " are";
    }
    v.evidence.push_back(fmt::format("At seq {} on communicator {}, {} in {}.", f.seq, f.comm, who, opShape(g)));
  }
  if (!p.groups.empty()) {
    v.headline = fmt::format(
        "Collective mismatch: rank(s) {} called a different collective than rank(s) {} ({}) at seq {} on "
        "communicator {}.",
        ranksText(odd), ranksText(p.groups.front().ranks), opShape(p.groups.front()), f.seq, f.comm);
  } else {
    v.headline = "Collective mismatch: rank(s) " + ranksText(odd) + " are at a different sequence number on communicator " + f.comm + ".";
  }
  int shown = 0;
  for (const RankSummary& s : job_.ranks) {
    for (const RingProgress& rp : s.ring_progress) {
      if (rp.comm != f.comm || !rp.mismatch || shown >= 4) continue;
      ++shown;
      v.evidence.push_back(fmt::format("Rank {}, in {} seq {}, received on channel {} a step of {} seq {}.", s.rank,
                                       rp.op, rp.seq, rp.channel, rp.mismatch->arrived_op, rp.mismatch->arrived_seq));
      break;
    }
  }
  v.next_steps.push_back("A program bug, not a hardware fault: find the code path where rank(s) " + ranksText(odd) +
                         " issue a different collective (a rank-dependent branch or uneven data); draining hosts will "
                         "not help. Restart after fixing it.");
}

void VerdictWording::mismatchUndecided(Verdict& v, const HangFocus& f, const CommPositions& p) const {
  const size_t largest = p.groups[0].ranks.size(), second = p.groups[1].ranks.size();
  v.hinges_on = fmt::format("where {} stand: without their snapshots {} rank(s) could turn the {} group into the majority",
                            ranksPhrase(p.members_missing), p.members_missing.size(), p.groups[1].op);
  v.headline = fmt::format(
      "Collective mismatch at seq {} on communicator {}: {} rank(s) in {}, {} in {}; {}, so which side is odd is not "
      "known.",
      f.seq, f.comm, largest, p.groups[0].op, second, p.groups[1].op, gapsSentence(v.lacking_data));
}

void VerdictWording::waitsAcrossCommunicators(Verdict& v, const HangFocus& f, const CommPositions& p,
                                              const HangFocus& held) const {
  v.headline = fmt::format(
      "Hang across communicators: rank(s) {} never called {} because their GPU waits in {} seq {} on communicator {}, "
      "which waits in turn on this one.",
      ranksText(p.behind), opText(f), held.op, held.seq, held.comm);
  v.reason = "the communicators wait on each other, so neither collective's progress says which rank or link began it";
  if (!held.moved.empty()) v.evidence.push_back(held.moved.back());
  v.hinges_on = "the order in which each rank issued its collectives on the two communicators (a program that "
                "issues them in different orders on different ranks deadlocks so), or a fault inside either collective";
  v.next_steps.push_back(fmt::format(
      "Check that every rank issues its collectives on communicators {} and {} in the same order (the stacks and the "
      "sequence numbers below); if they do, look for a fault in either collective.",
      f.comm, held.comm));
}

void VerdictWording::notInCollective(Verdict& v, const HangFocus& f, const CommPositions& p,
                                     const std::vector<int>& culprits, const std::vector<int>& waiting) const {
  v.headline = "Non-communication hang: rank(s) " + ranksText(culprits) + " never called " + opText(f) +
               ", which rank(s) " + ranksText(waiting) + " wait in.";
  for (int r : culprits) {
    auto li = p.last_issued.find(r);
    auto lc = p.last_completed.find(r);
    std::string last = li != p.last_issued.end() && li->second ? fmt::format("seq {}", *li->second) : "none";
    std::string done = lc != p.last_completed.end() && lc->second ? fmt::format("seq {}", *lc->second) : "none";
    const RankSummary* s = job_.find(r);
    std::string pending;
    if (s) {
      for (const SnapshotPendingOp& op : s->pending) {
        pending += (pending.empty() ? "" : ", ") + op.op;
        if (pending.size() > 80) break;
      }
    }
    v.evidence.push_back(describeRank(job_, r) + ": last collective issued on this communicator " + last +
                         ", last completed " + done + "; " +
                         (pending.empty() ? "no GPU work pending, so it is stuck in host code."
                                          : "pending on its streams: " + pending + "."));
  }
  if (!waiting.empty()) {
    double oldest = 0;
    for (int r : waiting) {
      if (const RankSummary* s = job_.find(r)) {
        for (const SnapshotPendingOp& op : s->pending) {
          if (op.comm == f.comm && op.seq && *op.seq == f.seq) oldest = std::max(oldest, op.age_s);
        }
      }
    }
    v.evidence.push_back("Rank(s) " + ranksText(waiting) + " have " + opText(f) + " pending, the oldest for " +
                         seconds(oldest) + ".");
  }
  if (!p.members_missing.empty()) {
    v.evidence.push_back(ranksPhrase(p.members_missing) + " left no snapshot: " +
                         (p.members_missing.size() == 1 ? "it" : "they") + " may not have called it either.");
  }
  v.next_steps.push_back("Not a network or GPU fault: rank(s) " + ranksText(culprits) +
                         " are stuck in host code (see where below: a data loader, a lock, a loop). Fix the program or "
                         "its input and restart from the last checkpoint; draining hosts will not help.");
}

// What each stuck stream waits on, in communicator terms: "rank 2 waits to receive from 1".
void VerdictWording::p2pWaits(Verdict& v, const std::string& comm) const {
  const bool shared = sequences_.sharedByProcess(comm);
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotPendingOp& op : s.pending) {
      if (op.comm != comm || op.op_class != "p2p" || !op.peer) continue;
      const std::string who =
          shared ? fmt::format("process rank {} (pid {})", s.rank, s.pid) : describeRank(job_, s.rank);
      v.evidence.push_back(fmt::format("{} has {}{}{}{} pending for {}.", who, op.op,
                                       op.op == "ncclRecv" ? " from " : " to ", shared ? "communicator rank " : "rank ",
                                       *op.peer, seconds(op.age_s)));
      if (v.evidence.size() >= 6) break;
    }
  }
  if (shared) {
    v.evidence.push_back("One process holds several ranks of communicator " + comm +
                         " (one per device it drives): ranks below are communicator ranks.");
  }
}

void VerdictWording::p2pLinkCulprit(Verdict& v, const std::string& comm, const ProxyFinding& pf) const {
  const std::string from = rankIn(comm, pf.link->from), to = rankIn(comm, pf.link->to);
  v.headline = fmt::format(
      "Communication hang: the link from {} to {} stopped delivering during point-to-point operations on "
      "communicator {}.",
      from, to, comm);
  v.evidence.push_back("From NCCL's profiler events in the snapshots (no debugger): " + proxySummary(pf) + ".");
  v.next_steps.push_back(fmt::format(
      "Test the link {} -> {} (nccl-tests between these two GPUs; NVLink / InfiniBand error counters).", from, to));
  v.next_steps.push_back("Drain that host (or exclude that link) and restart the job from the last checkpoint.");
}

void VerdictWording::p2pInconclusive(Verdict& v, const std::string& comm, const ProxyFinding& pf) const {
  v.reason = fmt::format(
      "point-to-point operations are stuck on communicator {} and no ring progress tells the link from the peer that "
      "never sent{}",
      comm, pf.note.empty() ? "" : " (" + pf.note + ")");
  v.headline = "Inconclusive: " + v.reason + ".";
  v.hinges_on = "per-connection progress of the stuck point-to-point operations";
  v.next_steps.push_back("Run the collector (HANGWATCH_COLLECT=1) for the debugger's view, or test the links of the "
                         "ranks named above with nccl-tests.");
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
