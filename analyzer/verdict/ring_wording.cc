// The wording of a ring-progress verdict: who waits, the culprit link or rank, or why none.
#include "hangwatch/verdict/verdict_wording.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/verdict/report.h"
#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

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
      v.next_steps.push_back(fmt::format("Look at {} directly (their logs, their hosts); they did not dump.",
                                         missingRanksPlaced(job_, missing)));
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
                 "(the collector's debugger phase did not run, failed or was cut short: the dumps listed as partial say "
                 "why), so the faulty link or rank cannot be told";
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

void VerdictWording::linkReceiverFinished(Verdict& v, const Link& link) const {
  const std::string who = describeRank(job_, link.to);
  v.evidence.push_back(fmt::format(
      "The link {} made the least progress, yet its receiver, {}, finished the collective: on a ring every member "
      "needs every step from its predecessor, so the link delivered what that rank's collective needed. A rank that "
      "ran another collective of the same kind at this position (one more, or one of another size: NCCL checks no "
      "sizes) finishes early just so and leaves its peers waiting.",
      linkText(link), who));
  v.hinges_on = fmt::format("which collective rank {} ran at this position (its own log or code path)", link.to);
  v.reason = fmt::format("the link {} looks stopped, but its receiver finished the collective: suspect {}",
                         linkText(link), suspectsText(v.suspects));
  v.headline = fmt::format("Inconclusive: {}.", v.reason);
  v.next_steps = {fmt::format("Check which collectives rank {} issued around this one (an extra or differently sized "
                              "all-reduce on one rank: a code path taken on that rank only).",
                              link.to),
                  fmt::format("If rank {} ran the same collective as its peers, test the link {} (nccl-tests between "
                              "those GPUs; NVLink / InfiniBand error counters).",
                              link.to, linkText(link))};
}

}  // namespace hangwatch::verdict
