// The wording of verdicts decided on sequence numbers: mismatches, non-communication hangs,
// waits across communicators, GPU work stuck outside collectives.
#include "hangwatch/verdict/verdict_wording.h"

#include <algorithm>

#include <fmt/format.h>

#include "hangwatch/verdict/report.h"
#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

void VerdictWording::mismatch(Verdict& v, const HangFocus& f, const CommPositions& p, const std::vector<int>& odd) const {
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const OpGroup& g = p.groups[i];
    std::string who = "rank(s) " + ranksText(g.ranks);
    if (i > 0 && g.ranks.size() <= 4) {
      who.clear();
      for (int r : g.ranks) who += (who.empty() ? "" : ", ") + describeRank(job_, r);
    }
    v.evidence.push_back(fmt::format("At seq {} on communicator {}, {} called {}.", f.seq, f.comm, who, opShape(g)));
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

void VerdictWording::divergedEarlier(Verdict& v, const HangFocus& hang, const Divergence& d) const {
  if (d.seq == hang.seq) return;
  v.evidence.push_back(fmt::format(
      "Read from the collectives each rank recorded issuing on this communicator (the last {} per rank): NCCL "
      "compares no sizes or kinds across ranks, so a rank that ran another collective at seq {} may finish it and go "
      "on, and from there its collectives are out of step with its peers'. The hang surfaced at {} seq {}.",
      SnapshotComm::kRecentKept, d.seq, hang.op, hang.seq));
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

}  // namespace hangwatch::verdict
