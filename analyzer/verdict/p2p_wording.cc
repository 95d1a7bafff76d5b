// The wording of a point-to-point hang.
#include "hangwatch/verdict/verdict_wording.h"

#include <fmt/format.h>

#include <algorithm>

#include "hangwatch/verdict/pipeline_layout.h"
#include "hangwatch/verdict/report.h"
#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

// What each stuck stream waits on, in communicator terms: "rank 2 waits to receive from 1".
void VerdictWording::p2pWaits(Verdict& v, const std::string& comm) const {
  const bool shared = sequences_.sharedByProcess(comm);
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotPendingOp& op : s.pending) {
      // What its GPU runs; transfers queued behind it wait on it, not on their peers.
      if (op.comm != comm || op.op_class != "p2p" || !op.peer || !op.gpu_started) continue;
      const std::string who =
          shared ? fmt::format("process rank {} (pid {})", s.rank, s.pid) : describeRank(job_, s.rank);
      v.evidence.push_back(fmt::format("{} has {}{}{}{} pending for {}.", who, op.op,
                                       op.op == "ncclRecv" ? " from " : " to ", shared ? "communicator rank " : "rank ",
                                       sequences_.globalRank(comm, *op.peer), seconds(op.age_s)));
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

void VerdictWording::peerNeverPosted(Verdict& v, const ChainEnd& e, const std::vector<WaitChain::Owed>& owed) const {
  const auto owes = [](const std::string& waiter_op) { return waiter_op == "ncclSend" ? "receive from" : "send to"; };
  if (v.culprit_ranks.size() == 1) {
    v.headline = fmt::format(
        "Non-communication hang: rank {} never posted the {} rank {} that rank {}'s {} waits for on communicator {}.",
        e.rank, owes(e.at.op), e.waiter, e.waiter, e.at.op, e.at.comm);
  } else {
    std::vector<int> waiters;
    for (const WaitChain::Owed& o : owed) waiters.push_back(o.waiter);
    v.headline = fmt::format(
        "Non-communication hang: {} never posted the sends or receives that {} wait for, and run nothing on their "
        "GPUs.",
        ranksPhrase(v.culprit_ranks), ranksPhrase(waiters));
  }
  // What each side issued, where the snapshots count it: one transfer never issued, or more.
  const PipelineLayout layout(job_);
  for (const WaitChain::Owed& o : owed) {
    const bool waiter_sends = o.op == "ncclSend";
    const std::optional<uint64_t> mine =
        waiter_sends ? layout.sends(o.comm, o.waiter, o.peer) : layout.receives(o.comm, o.waiter, o.peer);
    const std::optional<uint64_t> theirs =
        waiter_sends ? layout.receives(o.comm, o.peer, o.waiter) : layout.sends(o.comm, o.peer, o.waiter);
    if (!mine || !theirs || *mine == 0) {
      v.evidence.push_back(fmt::format("Rank {}'s {} {} rank {} waits; rank {} runs nothing on its GPU.", o.waiter,
                                       o.op, waiter_sends ? "to" : "from", o.peer, o.peer));
      continue;
    }
    v.evidence.push_back(fmt::format(
        "Rank {} issued {} {} rank {}; rank {} issued {} {} rank {}{}.", o.waiter, *mine,
        waiter_sends ? "sends to" : "receives from", o.peer, o.peer, *theirs, waiter_sends ? "receives from" : "sends to",
        o.waiter,
        *theirs < *mine ? fmt::format(": {} never issued on rank {}'s side", *mine - *theirs, o.peer) : ""));
  }
  for (int r : v.culprit_ranks) {
    std::string pending;
    if (const RankSummary* s = job_.find(r)) {
      for (const SnapshotPendingOp& op : s->pending) {
        pending += (pending.empty() ? "" : ", ") + op.op;
        if (pending.size() > 80) break;
      }
    }
    v.evidence.push_back(describeRank(job_, r) + ": " +
                         (pending.empty() ? "no GPU work pending, so it is in host code."
                                          : "nothing its GPU started is pending (queued: " + pending + ")."));
  }
  v.next_steps.push_back(fmt::format(
      "Not a network or GPU fault: {} did not issue the transfer(s) their peers wait for: stuck in host code (see "
      "where below: a data loader, a lock, a loop), or a schedule that ran one micro-batch fewer (compare the counts "
      "above). Fix the program or its input and restart from the last checkpoint; draining hosts will not help.",
      ranksPhrase(v.culprit_ranks)));
}

void VerdictWording::p2pPairUndecided(Verdict& v, const ChainEnd& e, const ProxyFinding& pf, bool both_ways) const {
  v.reason = fmt::format(
      "rank {}'s send to rank {} and rank {}'s receive from rank {} both run on communicator {} and neither ends: the "
      "link between them{}, or the GPU at either end, stopped, and nothing in the snapshots tells which{}",
      e.from, e.to, e.to, e.from, e.at.comm,
      both_ways ? fmt::format(" (either way: a transfer the other way is pending too, and a group's send and "
                              "receive run as one kernel, timed as one, so which half waits is not known)")
                : "",
      pf.note.empty() ? "" : " (" + pf.note + ")");
  v.headline = "Inconclusive: " + v.reason + ".";
  v.hinges_on = "per-connection progress of the stuck transfer";
  v.next_steps.insert(v.next_steps.begin(),
                      fmt::format("Test the link {} -> {}{} (nccl-tests between these two GPUs; NVLink / "
                                  "InfiniBand error counters), then each of the two GPUs.",
                                  e.from, e.to, both_ways ? " and back" : ""));
}

void VerdictWording::peerEndedOnTerm(Verdict& v, const ChainEnd& e, const std::vector<int>& silent) const {
  const char* dir = e.at.op == "ncclSend" ? "to" : "from";
  const ExitedRank* torn = job_.exited(e.rank);
  const std::string silent_text =
      silent.empty()       ? std::string("no other rank is silent, so nothing says which rank failed first")
      : silent.size() == 1 ? fmt::format("{} left no file at all and nobody said why: it is likely the rank that "
                                         "failed",
                                         ranksPhrase(silent))
                           : fmt::format("{} left no file at all and nobody said why: the rank that failed is likely "
                                         "among them",
                                         ranksPhrase(silent));
  v.evidence.push_back(fmt::format("Rank {}'s {} {} rank {} on communicator {} waits; rank {} ({}) ended on a SIGTERM "
                                   "it passed on with no GPU communication pending, as rank {} of its node saw.",
                                   e.waiter, e.at.op, dir, e.rank, e.at.comm, e.rank, deviceText(job_, e.rank),
                                   torn != nullptr ? torn->seen_by : -1));
  v.reason = fmt::format(
      "rank {}'s {} {} rank {} waits, and rank {} ended on the launcher's SIGTERM with nothing pending: the launcher "
      "was ending the job, as it does once a rank failed, so rank {} is not why it hung; {}",
      e.waiter, e.at.op, dir, e.rank, e.rank, e.rank, silent_text);
  v.headline = "Inconclusive: " + v.reason + ".";
  v.hinges_on = "which rank failed first (the launcher's log says: torchrun's 'Root Cause', srun's first exit)";
  v.next_steps.insert(v.next_steps.begin(),
                      fmt::format("Read the launcher's log for the rank that failed first{}.",
                                  silent.empty() ? "" : fmt::format(" (likely {})", ranksPhrase(silent))));
}

void VerdictWording::peerLeftNothing(Verdict& v, const ChainEnd& e, const std::vector<int>& candidates,
                                     const std::vector<int>& silent) const {
  const char* dir = e.at.op == "ncclSend" ? "to" : "from";
  const std::string peer = e.rank >= 0 ? fmt::format("rank {}", e.rank)
                                       : fmt::format("rank {} of communicator {}", e.peer_in_comm, e.at.comm);
  std::string who = e.rank >= 0 ? peer : std::string("that member");
  if (e.rank >= 0) {
    const std::string placed = deviceText(job_, e.rank);
    if (placed.find("unknown") == std::string::npos) who += " (" + placed + ")";
  }
  std::vector<int> on_term;
  for (int r : candidates)
    if (!std::count(silent.begin(), silent.end(), r)) on_term.push_back(r);
  const std::string which =
      e.rank >= 0 ? ""
                  : fmt::format("; no file names that member, so it is one of {}, which left no snapshot{}",
                                ranksPhrase(candidates),
                                on_term.empty() ? ""
                                                : fmt::format(" ({} ended on the launcher's SIGTERM with nothing "
                                                              "pending: no cause)",
                                                              ranksPhrase(on_term)));
  const bool collecting = e.rank >= 0 && std::count(job_.ranks_collecting.begin(), job_.ranks_collecting.end(), e.rank);
  const char* none = collecting ? "has no dump yet" : "left no file at all";
  v.evidence.push_back(fmt::format("Rank {}'s {} {} {} on communicator {} waits; {} {}{}.", e.waiter, e.at.op, dir,
                                   e.rank >= 0 ? peer : fmt::format("its rank {}", e.peer_in_comm), e.at.comm, who,
                                   none, which));
  v.reason = fmt::format(
      "rank {}'s {} {} {} waits, and {} {}{}: {}", e.waiter, e.at.op, dir,
      e.rank >= 0 ? fmt::format("{} on communicator {}", peer, e.at.comm) : peer, e.rank >= 0 ? peer : "that member",
      none, which,
      collecting ? "its collector was still at work when the report was made; report again once it is done"
                 : "its process may have ended or be stopped, its node or network may be gone, or its dumps were "
                   "lost on the way to storage; nothing in the files says which");
  v.headline = "Inconclusive: " + v.reason + ".";
  v.hinges_on = fmt::format("the own dump of {}, or word of its process from its node or NCCL's RAS",
                            e.rank >= 0 ? peer : ranksPhrase(candidates));
  v.next_steps.insert(v.next_steps.begin(),
                      fmt::format("Find what happened to {}: whether the process is still there, the job's log of "
                                  "that rank, dmesg on its host; then whether its dumps reached the job folder.",
                                  ranksPhrase(silent.empty() ? candidates : silent)));
}

void VerdictWording::transfersDisagree(Verdict& v, const std::vector<std::string>& counts,
                                       std::optional<uint64_t> usual) const {
  if (v.confident) {
    v.headline = fmt::format(
        "Transfer mismatch: {} issued a different number of sends and receives to their pipeline neighbours than most "
        "ranks ({} to each): the stages' schedules no longer match, and a transfer waits for a half that never comes.",
        ranksPhrase(v.culprit_ranks), *usual);
  } else {
    v.reason = usual ? fmt::format("the two ends of the waiting transfer issued different numbers of transfers to each "
                                   "other, and the usual count ({}) does not say which end's schedule is the odd one",
                                   *usual)
                     : std::string("the two ends of the waiting transfer issued different numbers of transfers to each "
                                   "other, and no count is held by most of the job's records (half the ranks run one "
                                   "schedule, half another), so nothing says which end's schedule is the odd one");
    v.headline = "Inconclusive: " + v.reason + ".";
  }
  v.evidence.insert(v.evidence.end(), counts.begin(), counts.end());
  v.evidence.push_back(std::string("No link lost them: a dead link leaves both ends' counts equal (each issued the "
                                   "transfer it waits in).") +
                       (usual ? fmt::format(" The usual count, {}, is what most ranks issued to each neighbour.", *usual)
                              : ""));
  v.next_steps.push_back(
      "Not a network or GPU fault: the pipeline schedule differs between stages (a micro-batch count, a condition that "
      "skips a send or receive on some ranks). Compare the stages' schedules and restart from the last checkpoint; "
      "draining hosts will not help.");
}

void VerdictWording::lostInTransit(Verdict& v, const std::vector<LostTransfer>& lost, bool decided) const {
  for (const LostTransfer& l : lost)
    v.evidence.push_back(fmt::format(
        "Rank {} completed {} sends to rank {}; rank {} completed {} receives from rank {}, and the group its GPU runs "
        "holds receive {}: the data left rank {} and never arrived. Not a schedule mismatch: each end issued the "
        "halves the other waits for.",
        l.from, l.sent_done, l.to, l.to, l.received_done, l.from, l.received_done + 1, l.from));
  if (decided) return;
  const LostTransfer& l = lost.front();
  v.reason = fmt::format("the data rank {} sent to rank {} on communicator {} left rank {} and never arrived: the link "
                         "{} -> {} stopped, or rank {}'s GPU, and nothing in the snapshots tells which",
                         l.from, l.to, v.communicator, l.from, l.from, l.to, l.to);
  v.headline = "Inconclusive: " + v.reason + ".";
  v.hinges_on = "whether the link or the receiving GPU stopped";
  v.next_steps.clear();
  v.next_steps.push_back(fmt::format("Test the link {} -> {} (nccl-tests between these two GPUs; NVLink / InfiniBand "
                                     "error counters), then rank {}'s GPU (nvidia-smi, Xid errors in the kernel log).",
                                     l.from, l.to, l.to));
}

void VerdictWording::lostOnTheLink(Verdict& v, const LostTransfer& l, const RingConnection& waits) const {
  const std::string from = rankIn(v.communicator, l.from), to = rankIn(v.communicator, l.to);
  v.headline = fmt::format(
      "Communication hang: the link from {} to {} stopped delivering during point-to-point operations on "
      "communicator {}.",
      from, to, v.communicator);
  v.evidence.push_back(fmt::format(
      "From the collector's debugger phase: rank {}'s GPU waits for that data (a thread polls the connection from "
      "rank {}, whose tail stands at step {}; it needs step {}): the GPU runs, the data did not come.",
      l.to, l.from, waits.observed_step, waits.target_step));
  v.next_steps.clear();
  v.next_steps.push_back(fmt::format(
      "Test the link {} -> {} (nccl-tests between these two GPUs; NVLink / InfiniBand error counters).", from, to));
  v.next_steps.push_back("Drain that host (or exclude that link) and restart the job from the last checkpoint.");
}

void VerdictWording::pipelinePlaces(Verdict& v, const std::optional<Link>& link) const {
  const auto stageOf = [&](int rank) -> const RankPlaceInJob* {
    for (const RankPlaceInJob& p : v.places)
      if (p.rank == rank) return &p;
    return nullptr;
  };
  const auto stageText = [](const RankPlaceInJob& p) {
    return fmt::format("pipeline stage {} of {} (ranks {})", p.stage, p.stages, ranksText(p.stage_ranks));
  };
  if (link) {
    const RankPlaceInJob* a = stageOf(link->from);
    const RankPlaceInJob* b = stageOf(link->to);
    if (a && b && a->stage != b->stage) {
      v.evidence.push_back(fmt::format("The link {} -> {} joins {} to {}.", link->from, link->to, stageText(*a),
                                       stageText(*b)));
      return;
    }
  }
  for (const RankPlaceInJob& p : v.places) {
    std::string groups;
    for (const std::vector<int>& g : p.groups) groups += fmt::format("{}ranks {}", groups.empty() ? "" : "; ", ranksText(g));
    v.evidence.push_back(fmt::format("Rank {} is in {}{}.", p.rank, stageText(p),
                                     groups.empty() ? "" : ", and in the groups of " + groups));
  }
}

}  // namespace hangwatch::verdict
