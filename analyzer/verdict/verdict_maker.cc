#include "hangwatch/verdict/verdict_maker.h"

#include "hangwatch/verdict/pipeline_layout.h"
#include "hangwatch/verdict/wait_chain.h"

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <span>

#include "hangwatch/verdict/proxy_progress_analysis.h"
#include "hangwatch/verdict/ring_progress_analysis.h"
#include "hangwatch/verdict/verdict_wording.h"
#include "wording_text.h"

namespace hangwatch::verdict {
namespace {

// Helper threads that look the same on every rank are no evidence; threads named after
// simgpu channels or hangwatch are never where a culprit stands.
bool isInfrastructureThread(const std::string& name) {
  return name.rfind("simnccl", 0) == 0 || name.rfind("simgpu", 0) == 0 || name.rfind("hangwatch", 0) == 0;
}

void sortSuspects(std::vector<Suspect>& s) {
  std::stable_sort(s.begin(), s.end(), [](const Suspect& a, const Suspect& b) { return a.ranks < b.ranks; });
}

std::vector<std::string> whereFrames(std::span<const stackmerge::TableFrame> frames) {
  using stackmerge::TableFrame;
  std::vector<std::string> out;
  bool python = std::any_of(frames.begin(), frames.end(), [](const TableFrame& f) { return f.kind == FrameKind::kPython; });
  if (python) {
    // The Python frames say where the program is; the innermost native frame says what it waits on.
    if (!frames.empty() && frames.front().kind == FrameKind::kNative) out.emplace_back(frames.front().label);
    for (const TableFrame& f : frames) {
      if (f.kind == FrameKind::kPython && out.size() < 8) out.emplace_back(f.label);
    }
    return out;
  }
  for (const TableFrame& f : frames) {
    if (out.size() >= 8) break;
    out.emplace_back(f.label);
  }
  return out;
}

// The watchdog's hash of the communicator NCCL knows as `nccl_id` on this rank; empty when
// the rank's snapshot does not tie them.
std::string watchdogHashOf(const RankSummary& s, const std::string& nccl_id) {
  for (const SnapshotComm& c : s.comms)
    if (c.nccl_id == nccl_id) return c.hash;
  return "";
}

// A record of a transfer's kernel (simnccl's Send/Recv, NCCL's SendRecv): it says where a
// point-to-point transfer waits, never how far a collective's ring or tree got.
bool isTransferRecord(const RingProgress& r) {
  return r.op == "ncclSend" || r.op == "ncclRecv" || r.op == "ncclSendRecv";
}

}  // namespace

Verdict VerdictMaker::decide() const {
  Verdict v = byRule();
  placeInPipeline(v);
  noteFrozenThenContinued(v);
  hedgeTooFewAnswered(v);
  addCulpritStacks(v);
  wording_.dataNotes(v);
  // An inconclusive verdict decided nothing: it is never confident, whatever rule made it.
  if (v.kind == VerdictKind::kInconclusive) v.confident = false;
  return v;
}

Verdict VerdictMaker::byRule() const {
  const bool any_snapshot =
      std::any_of(job_.ranks.begin(), job_.ranks.end(), [](const RankSummary& s) { return s.has_snapshot; });
  if (job_.ranks.empty()) return noDumps();
  if (!any_snapshot) return noSnapshots();
  if (std::optional<HangFocus> f = sequences_.focus()) {
    CommPositions p = sequences_.positions(*f);
    // Follow a rank that never called the collective to the one its GPU is stuck in, once per
    // communicator (a cycle, communicators waiting on each other, stays where it began).
    std::set<std::string> seen{f->comm};
    std::optional<HangFocus> cycle;
    while (p.groups.size() <= 1 && !p.behind.empty()) {
      std::optional<HangFocus> held = sequences_.heldElsewhere(*f, p.behind);
      if (!held) break;
      if (!seen.insert(held->comm).second) {
        cycle = std::move(held);
        break;
      }
      CommPositions hp = sequences_.positions(*held);
      if (hp.groups.empty() && hp.in_host_call.empty()) break;  // nobody waits there: not where it hangs
      f = std::move(held);
      p = std::move(hp);
    }
    // Members that are not in it because their GPU runs something else (a transfer, a
    // collective queued ahead): follow the waits to where they end (wait_chain.h).
    if (!cycle) {
      ChainEnd e = WaitChain(job_, sequences_).fromCollective(*f);
      if (e.kind == ChainEnd::Kind::kHostCode && e.waiter >= 0) return peerNeverPosted(e);
      if (e.kind == ChainEnd::Kind::kP2pLink) return p2pPair(e);
      if (e.kind == ChainEnd::Kind::kPeerLeftNothing) return peerLeftNothing(e);
      if (e.kind == ChainEnd::Kind::kHostCode || e.kind == ChainEnd::Kind::kCollective) {
        f = std::move(e.at);
        p = sequences_.positions(*f);
      }
    }
    // A rank inside ncclCommInitRank* for another communicator waits for that one's members:
    // it is held up, not in host code of its own.
    std::vector<int> in_host_code, in_init;
    for (int r : p.behind) (insideInit(r) ? in_init : in_host_code).push_back(r);
    // Members that called different collectives at or before this position: the hang is where
    // that surfaced, the mismatch is the cause (an earlier one takes the place of one here).
    if (std::optional<Divergence> d = sequences_.firstDivergence(f->comm, f->seq)) {
      Verdict v = d->seq == f->seq && p.groups.size() > 1 ? mismatch(*f, p) : divergedEarlier(*f, p, *d);
      v.evidence.insert(v.evidence.begin(), f->moved.begin(), f->moved.end());
      return v;
    }
    const bool one_collective = p.groups.size() <= 1 && !cycle;  // no mismatch, no cycle
    if (one_collective && !p.behind.empty() && in_host_code.empty()) {
      if (std::optional<Verdict> v = notFormed()) return *v;
    }
    Verdict v = p.groups.size() > 1      ? mismatch(*f, p)
                : cycle                ? waitsAcrossCommunicators(*f, p, *cycle)
                : !in_host_code.empty() ? notInCollective(*f, p, in_host_code)
                                       : fromRingProgress(*f, p);
    if (one_collective && !in_init.empty() && !in_host_code.empty()) wording_.heldInInit(v, in_init);
    if (one_collective && in_host_code.empty()) blameExited(v, *f, p);
    if (one_collective && in_host_code.empty() && !v.confident) blameLostByNetwork(v, *f, p);
    if (one_collective && in_host_code.empty() && !v.confident) blameUnansweredRas(v, *f, p);
    v.evidence.insert(v.evidence.begin(), f->moved.begin(), f->moved.end());
    return v;
  }
  if (std::optional<Verdict> v = notFormed()) return *v;
  if (sequences_.ranksWithPendingWork().empty()) return nothingPending();
  const ChainEnd e = WaitChain(job_, sequences_).fromTransfers();
  if (e.kind == ChainEnd::Kind::kHostCode && e.waiter >= 0) return peerNeverPosted(e);
  if (e.kind == ChainEnd::Kind::kP2pLink) return p2pPair(e);
  if (e.kind == ChainEnd::Kind::kPeerLeftNothing) return peerLeftNothing(e);
  if (std::string comm = stuckP2pComm(); !comm.empty()) return fromP2p(comm);
  return outsideCollectives();
}

// A pipeline job's culprits and link ends placed in their stage and groups (pipeline_layout.h);
// a link between two stages is said as such.
void VerdictMaker::placeInPipeline(Verdict& v) const {
  const PipelineLayout layout(job_);
  std::vector<int> ranks = v.culprit_ranks;
  std::optional<Link> link = v.culprit_link;
  // One suspect link, or one link both ways; a GPU at one of its ends may be a suspect beside it.
  const auto sameEnds = [&](const Suspect& s) {
    if (!v.suspects[0].link || v.suspects[0].link->to < 0) return false;
    const auto ends = std::minmax(v.suspects[0].link->from, v.suspects[0].link->to);
    if (!s.link)
      return !s.ranks.empty() && std::all_of(s.ranks.begin(), s.ranks.end(),
                                             [&](int r) { return r == ends.first || r == ends.second; });
    return s.link->to >= 0 && std::minmax(s.link->from, s.link->to) == ends;
  };
  if (!link && !v.suspects.empty() && std::all_of(v.suspects.begin(), v.suspects.end(), sameEnds))
    link = v.suspects[0].link;
  if (v.link_in_comm_ranks) return;
  if (link) ranks = {link->from, link->to};
  if (ranks.empty() && v.suspects.size() == 1) ranks = v.suspects[0].ranks;
  for (int r : ranks) {
    const std::optional<PipelinePlace> p = layout.of(r);
    if (!p) continue;
    RankPlaceInJob place{r, p->stage, p->stages, p->stage_ranks, {}};
    for (const RankGroup& g : p->groups) place.groups.push_back(g.ranks);
    v.places.push_back(std::move(place));
  }
  wording_.pipelinePlaces(v, link);
}

// The two ends of the transfer the waits ended at issued different numbers of transfers to
// each other (comms[].p2p): no link lost them, the schedules no longer match. The end whose
// count is not the one most of the job's records hold is the odd one (a stage that ran one
// micro-batch fewer, or one more); its tensor-parallel peers, which run the same schedule,
// usually are too and are named where their own pair disagrees the same way. Compared on the
// waiting pair only: hosts that synchronize per transfer stop at different points of the
// schedule, so other pairs may differ without a fault; the waiting pair's ends both issued the
// transfer they wait in.
std::optional<Verdict> VerdictMaker::transfersDisagree(const ChainEnd& e) const {
  const PipelineLayout layout(job_);
  struct Gap {
    int from, to;
    uint64_t sent, received;
  };
  // This pair's disagreements, then any pair of the job that disagrees with the same odd count.
  const auto gapsOf = [&](const std::string& comm, int a, int b) {
    std::vector<Gap> out;
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      const std::optional<uint64_t> sent = layout.sends(comm, from, to), got = layout.receives(comm, to, from);
      if (sent && got && *sent != *got) out.push_back({from, to, *sent, *got});
    }
    return out;
  };
  std::vector<Gap> gaps = gapsOf(e.at.comm, e.from, e.to);
  if (gaps.empty()) return std::nullopt;
  const std::optional<uint64_t> usual = layout.usualCount();
  std::set<int> odd, unsure;
  std::optional<uint64_t> odd_count;
  for (const Gap& g : gaps) {
    const bool sender_odd = usual && g.sent != *usual, receiver_odd = usual && g.received != *usual;
    if (sender_odd == receiver_odd) {
      unsure.insert({g.from, g.to});
      continue;
    }
    odd.insert(sender_odd ? g.from : g.to);
    odd_count = sender_odd ? g.sent : g.received;
  }
  Verdict v;
  v.kind = VerdictKind::kCollectiveMismatch;
  v.communicator = e.at.comm;
  v.op = OpRef{"ncclSend/ncclRecv", std::nullopt};
  v.confident = unsure.empty() && !odd.empty();
  if (v.confident) {
    // The odd ranks' tensor-parallel peers run the same schedule: ranks of the same stage whose
    // own transfer records hold the same odd count.
    const std::optional<PipelinePlace> stage = layout.of(*odd.begin());
    for (const RankSummary& s : job_.ranks) {
      const std::optional<PipelinePlace> here = layout.of(s.rank);
      if (!stage || !here || here->stage != stage->stage || here->stages != stage->stages) continue;
      for (const SnapshotComm& c : s.comms)
        for (const SnapshotP2pPeer& p : c.p2p)
          if (p.sends == *odd_count || p.receives == *odd_count) odd.insert(s.rank);
    }
    v.culprit_ranks.assign(odd.begin(), odd.end());
  } else {
    for (int r : odd) v.suspects.push_back(rankSuspect(r));
    for (int r : unsure) v.suspects.push_back(rankSuspect(r));
    v.hinges_on = "which end's schedule is the one the program meant";
  }
  std::vector<std::string> lines;
  for (const Gap& g : gaps)
    lines.push_back(fmt::format("Rank {} issued {} sends to rank {}; rank {} posted {} receives from rank {}.", g.from,
                                g.sent, g.to, g.to, g.received, g.from));
  wording_.transfersDisagree(v, lines, usual);
  v.evidence.insert(v.evidence.begin(), e.at.moved.begin(), e.at.moved.end());
  return v;
}

// The waits end at a rank that runs nothing while a send or receive of a peer waits for its
// half: it never posted it, and is in host code.
Verdict VerdictMaker::peerNeverPosted(const ChainEnd& e) const {
  Verdict v;
  v.kind = VerdictKind::kNonCommunicationHang;
  v.communicator = e.at.comm;
  v.op = OpRef{e.at.op, std::nullopt};
  // Every rank that owes a transfer an overdue one waits for is named: a stage's tensor-parallel
  // ranks run the same schedule, so when one skips a transfer its peers do too.
  std::vector<WaitChain::Owed> owed = WaitChain(job_, sequences_).owedTransfers();
  if (std::none_of(owed.begin(), owed.end(), [&](const auto& o) { return o.peer == e.rank && o.waiter == e.waiter; }))
    owed.insert(owed.begin(), {e.waiter, e.rank, e.at.comm, e.at.op});
  std::set<int> culprits;
  for (const WaitChain::Owed& o : owed) culprits.insert(o.peer);
  v.culprit_ranks.assign(culprits.begin(), culprits.end());
  wording_.peerNeverPosted(v, e, owed);
  v.evidence.insert(v.evidence.begin(), e.at.moved.begin(), e.at.moved.end());
  return v;
}

// The waits end at a transfer whose peer left no file at all: nothing says where it stands, and
// the transfer cannot end without it. Named as a collective's missing member is, from what
// says why it is silent: its node found its process gone or stopped, NCCL failed the
// communicator with ncclRemoteError, or NCCL's RAS lists it missing. Else it is the suspect,
// and the hedge says so: a live process whose dumps were lost looks the same.
Verdict VerdictMaker::peerLeftNothing(const ChainEnd& e) const {
  Verdict v;
  v.kind = VerdictKind::kInconclusive;
  v.confident = false;
  v.communicator = e.at.comm;
  v.op = OpRef{e.at.op, std::nullopt};
  // No file names the peer (it is one of the ranks without a snapshot), or the peer ended on
  // the launcher's SIGTERM (it went because another failed): the silent others are the suspects.
  const bool torn_down = e.rank >= 0 && endedOnTerm(e.rank);
  if (e.rank < 0 || torn_down) {
    const std::vector<int>& no_snapshot = sequences_.ranksWithoutSnapshot();
    std::vector<int> silent;
    std::copy_if(no_snapshot.begin(), no_snapshot.end(), std::back_inserter(silent),
                 [&](int r) { return !endedOnTerm(r); });
    for (int r : silent) v.suspects.push_back(rankSuspect(r));
    if (torn_down) wording_.peerEndedOnTerm(v, e, silent);
    else wording_.peerLeftNothing(v, e, no_snapshot, silent);
    v.evidence.insert(v.evidence.begin(), e.at.moved.begin(), e.at.moved.end());
    return v;
  }
  v.suspects = {rankSuspect(e.rank)};
  wording_.peerLeftNothing(v, e, {e.rank}, {e.rank});
  CommPositions p;
  p.members_missing = {e.rank};
  p.comm_size = sequences_.commSize(e.at.comm);
  blameExited(v, e.at, p);
  if (!v.confident) blameLostByNetwork(v, e.at, p);
  if (!v.confident) blameUnansweredRas(v, e.at, p);
  v.evidence.insert(v.evidence.begin(), e.at.moved.begin(), e.at.moved.end());
  return v;
}

bool VerdictMaker::endedOnTerm(int rank) const {
  const ExitedRank* e = job_.exited(rank);
  return e != nullptr && e->on_term;
}

// The waits end at a send and its receive, both running: the link between them, or a GPU at
// either end. NCCL's profiler names the link when steps sit on the wire; else both are suspects.
// Different counts at the two ends are a schedule mismatch only when a half was never issued:
// data that left its sender and never arrived is the link's (or the receiving GPU's).
Verdict VerdictMaker::p2pPair(const ChainEnd& e) const {
  std::vector<LostTransfer> lost = lostInTransit(e.at.comm, e.to);
  if (lost.empty()) lost = lostInTransit(e.at.comm, e.from);
  if (lost.empty())
    if (std::optional<Verdict> m = transfersDisagree(e)) return *m;
  Verdict v = fromP2p(e.at.comm, &e);
  if (!lost.empty() && !v.culprit_link) {
    // The debugger read the receiving GPU's thread polling that connection's tail for a step it
    // has not got: the GPU runs and waits, the data did not come: the link.
    const LostTransfer& l = lost.front();
    if (std::optional<RingConnection> waits = receiverWaitsFor(e.at.comm, l.to, l.from)) {
      v.kind = VerdictKind::kCommunicationHang;
      v.source = "debugger";
      v.confident = true;
      v.culprit_link = Link{l.from, l.to};
      v.culprit_ranks = {std::min(l.from, l.to), std::max(l.from, l.to)};
      v.suspects.clear();
      v.hinges_on.clear();
      v.reason.clear();
      v.lacking_data.clear();
      wording_.lostOnTheLink(v, l, *waits);
    }
  }
  if (!lost.empty()) {
    const bool decided = v.culprit_link.has_value();
    if (!decided) {
      v.suspects.clear();
      for (const LostTransfer& l : lost) v.suspects.push_back(linkSuspect({l.from, l.to}));
      v.suspects.push_back(rankSuspect(lost.front().to));
    }
    wording_.lostInTransit(v, lost, decided);
  }
  v.evidence.insert(v.evidence.begin(), e.at.moved.begin(), e.at.moved.end());
  return v;
}

// The debugger's record of `rank` waiting for data from global rank `from` on `comm`: a thread
// polling that connection's tail, which stands below the step it needs. The record's comm is
// the reader's hash or NCCL's id, joined through the rank's own communicators.
std::optional<RingConnection> VerdictMaker::receiverWaitsFor(const std::string& comm, int rank, int from) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return std::nullopt;
  const SnapshotComm* c = nullptr;
  for (const SnapshotComm& x : s->comms)
    if (x.hash == comm && x.rank >= 0) c = &x;
  if (c == nullptr) return std::nullopt;
  for (const RingProgress& r : s->ring_progress) {
    const bool ours = r.comm == comm || (!r.nccl_comm.empty() && r.nccl_comm == c->nccl_id);
    if (!ours || r.source == "nccl-host") continue;
    for (const RingConnection& k : r.connections)
      if (k.direction == "recv" && k.waiting && k.target_known && k.observed_known && k.observed_step < k.target_step &&
          k.peer >= 0 && sequences_.globalRank(comm, k.peer) == from)
        return k;
  }
  return std::nullopt;
}

// How many sends to (receives from) global rank `peer` on `comm` are pending at `rank`.
uint64_t VerdictMaker::pendingTransfers(const std::string& comm, int rank, int peer, bool send) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return 0;
  return static_cast<uint64_t>(std::count_if(s->pending.begin(), s->pending.end(), [&](const SnapshotPendingOp& op) {
    return op.comm == comm && op.op_class == "p2p" && op.peer && sequences_.globalRank(comm, *op.peer) == peer &&
           (op.op == "ncclSend") == send;
  }));
}

// The group of transfers `rank`'s GPU runs on `comm` (its head and the transfers queued right
// behind it: a group is one kernel, and only its first is timed), when every half of it was done
// by its peer: each send received, each receive's data sent. Those receives' data was lost. Ops
// that are in fact later kernels only add halves their peers cannot have done: never a false
// "lost". Counts from comms[].p2p; completed = issued - pending.
std::vector<LostTransfer> VerdictMaker::lostInTransit(const std::string& comm, int rank) const {
  const RankSummary* s = job_.find(rank);
  const SnapshotPendingOp* head = WaitChain(job_, sequences_).head(rank);
  if (s == nullptr || head == nullptr || head->op_class != "p2p" || head->comm != comm) return {};
  const PipelineLayout layout(job_);
  std::map<std::pair<int, bool>, uint64_t> nth;  // (peer, send) -> halves of the group so far
  std::vector<LostTransfer> lost;
  for (size_t i = static_cast<size_t>(head - s->pending.data()); i < s->pending.size(); ++i) {
    const SnapshotPendingOp& op = s->pending[i];
    if (op.op_class != "p2p" || op.comm != comm) break;
    if (!op.peer) return {};
    const int peer = sequences_.globalRank(comm, *op.peer);
    const bool send = op.op == "ncclSend";
    const std::optional<uint64_t> mine = send ? layout.sends(comm, rank, peer) : layout.receives(comm, rank, peer);
    const std::optional<uint64_t> theirs = send ? layout.receives(comm, peer, rank) : layout.sends(comm, peer, rank);
    const uint64_t mine_pending = pendingTransfers(comm, rank, peer, send);
    const uint64_t theirs_pending = pendingTransfers(comm, peer, rank, !send);
    // No counts (dumps from before them, a peer beyond the eight counted), or fewer than pending.
    if (!mine || !theirs || *mine < mine_pending || *theirs < theirs_pending || *mine == 0) return {};
    const uint64_t mine_done = *mine - mine_pending;
    const uint64_t theirs_done = *theirs - theirs_pending;
    const uint64_t index = mine_done + 1 + nth[{peer, send}]++;  // this half's number between the two
    if (theirs_done < index) return {};  // the peer has not done its half: not lost
    if (!send) lost.push_back({peer, rank, theirs_done, mine_done});
  }
  return lost;
}

Verdict VerdictMaker::noSnapshots() const {
  Verdict v;
  v.kind = VerdictKind::kInconclusive;
  v.confident = false;
  for (const RankSummary& s : job_.ranks) v.lacking_data.push_back({s.rank, s.lacking("")});
  wording_.noSnapshots(v);
  return v;
}

// Work is pending but no collective: a GEMM, kernel or copy that never finished.
Verdict VerdictMaker::outsideCollectives() const {
  std::vector<OverdueOp> stuck;
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotPendingOp& op : s.pending) {
      if (s.timeout_s > 0 && op.age_s >= s.timeout_s) {
        stuck.push_back({s.rank, op.op, op.age_s, s.timeout_s});
        break;
      }
    }
  }
  Verdict v;
  v.kind = stuck.empty() ? VerdictKind::kInconclusive : VerdictKind::kNonCommunicationHang;
  for (const OverdueOp& o : stuck) v.culprit_ranks.push_back(o.rank);
  wording_.outsideCollectives(v, stuck);
  return v;
}

// Every rank that answered waits in the collective and a member's process is gone: it can
// never complete, whatever the ring progress shows around the dead rank's links. Evidence: the
// member's state file, written by a rank of its node that found its pid gone from the node's
// board (/proc and kill(0) on that node: the same on a GPU job). A member whose process is
// stopped (state T in /proc/<pid>/stat: SIGSTOP, a job-control stop; not a tracer's stop) is
// as sure a cause: its host threads, NCCL's proxy among them, run nothing, so on a GPU job its
// kernels may finish what was launched but nothing more is launched or moved over the network.
// A rank alone on its node, or one whose node died whole, has nobody to say so: it stays a
// rank without a snapshot. One that ended on a SIGTERM it passed on with nothing pending is not
// named: that is the launcher ending every rank once one failed (torchrun, srun
// --kill-on-bad-exit), and the one that failed is elsewhere.
void VerdictMaker::blameExited(Verdict& v, const HangFocus& f, const CommPositions& p) const {
  std::vector<ExitedRank> exited;
  for (const ExitedRank& e : job_.ranks_exited)
    if (!e.on_term && std::count(p.members_missing.begin(), p.members_missing.end(), e.rank)) exited.push_back(e);
  if (exited.empty()) return;
  std::vector<int> ranks;
  for (const ExitedRank& e : exited) ranks.push_back(e.rank);
  nameMissingMembers(v, f, ranks);
  wording_.exitedInside(v, f, exited);
}

// The focus collective's hang is `ranks`' doing, confidently, whatever the ring progress around
// them showed: they are no longer what the verdict lacks data from.
void VerdictMaker::nameMissingMembers(Verdict& v, const HangFocus& f, const std::vector<int>& ranks) const {
  v.kind = VerdictKind::kCommunicationHang;
  v.communicator = f.comm;
  v.op = OpRef{f.op, wording::isTransferOp(f.op) ? std::nullopt : std::optional<uint64_t>(f.seq)};
  v.culprit_ranks = ranks;
  v.culprit_link.reset();
  v.suspects.clear();
  v.reason.clear();
  std::erase_if(v.lacking_data, [&](const DataGap& g) { return std::count(ranks.begin(), ranks.end(), g.rank) > 0; });
  v.confident = true;
  v.hinges_on.clear();
}

// The one member with no file at all, while NCCL failed the communicator on members that did
// dump with ncclRemoteError (their snapshots' async_error, ncclCommGetAsyncError at the
// snapshot): NCCL's proxy lost a network peer, whose connection closed (sockets: the peer's
// kernel closed it when its process ended) or whose queue pair stopped answering (IB: retries
// ran out). A live process keeps both, stopped or not, and dumps; the member that wrote nothing
// is the one NCCL lost: its process ended, or its node or its network went with it. Two or more
// members without a dump: NCCL's error names no peer, so which is not said. The same on a GPU
// job; what it cannot tell apart (process, node, network) the wording leaves open.
void VerdictMaker::blameLostByNetwork(Verdict& v, const HangFocus& f, const CommPositions& p) const {
  if (p.members_missing.size() != 1) return;
  const int lost = p.members_missing.front();
  if (endedOnTerm(lost)) return;  // NCCL lost it when the launcher ended it: no cause
  if (std::count(job_.ranks_collecting.begin(), job_.ranks_collecting.end(), lost)) return;
  if (const RankSummary* s = job_.find(lost); s && s->answered()) return;
  std::vector<int> seen_by;
  for (const RankSummary& s : job_.ranks)
    for (const SnapshotComm& c : s.comms)
      if (c.hash == f.comm && c.async_error == "ncclRemoteError" && s.rank != lost) seen_by.push_back(s.rank);
  if (seen_by.empty()) return;
  nameMissingMembers(v, f, {lost});
  wording_.lostByNetwork(v, f, lost, seen_by);
}

std::vector<const RasComm*> VerdictMaker::rasCommsOf(const RankSummary& s, const HangFocus& f, int comm_size) const {
  uint64_t nccl_id = 0;
  for (const RankSummary& r : job_.ranks)
    for (const SnapshotComm& c : r.comms)
      if (c.hash == f.comm && ncclIdValue(c.nccl_id) != 0) nccl_id = ncclIdValue(c.nccl_id);
  std::vector<const RasComm*> out;
  if (!s.ras || !s.ras->error.empty()) return out;
  for (const RasComm& c : s.ras->communicators) {
    if (nccl_id != 0) {
      if (std::strtoull(c.hash.c_str(), nullptr, 16) == nccl_id) out.push_back(&c);
      continue;
    }
    if (c.size != comm_size || c.ranks.empty()) continue;
    const bool same_pids = std::all_of(c.ranks.begin(), c.ranks.end(), [&](const RasMember& m) {
      const RankSummary* owner = nullptr;
      return sequences_.commEntry(f.comm, m.rank, &owner) != nullptr && owner->pid == m.pid;
    });
    if (same_pids) out.push_back(&c);
  }
  return out;
}

// The one member with no file at all, which NCCL's RAS lists missing on the focus
// communicator: RAS (a thread in every NCCL process, networked with keepalives beside NCCL's
// transport) got no answer from its process, asked from another node by a collector before it
// stopped anything, or by `forensics ras` where no collector ran. A live process answers RAS
// and dumps; one that does neither ended, is stopped, or lost its node or network. Where NCCL's
// transport reports nothing (an IB queue pair with nothing posted to the dead peer never fails),
// RAS still tells. Not decided: an answer that lists the member as answering, or a pid other
// than the one its own files name.
void VerdictMaker::blameUnansweredRas(Verdict& v, const HangFocus& f, const CommPositions& p) const {
  if (p.members_missing.size() != 1) return;
  const int lost = p.members_missing.front();
  if (endedOnTerm(lost)) return;  // RAS misses it because the launcher ended it: no cause
  if (std::count(job_.ranks_collecting.begin(), job_.ranks_collecting.end(), lost)) return;
  const RankSummary* lost_files = job_.find(lost);
  if (lost_files && lost_files->answered()) return;
  const int64_t known_pid = lost_files && lost_files->state ? lost_files->state->pid : 0;
  std::vector<RasSighting> seen;
  for (const RankSummary& s : job_.ranks) {
    if (s.rank == lost) continue;
    for (const RasComm* c : rasCommsOf(s, f, p.comm_size)) {
      for (const RasMember& m : c->ranks)
        if (sequences_.globalRank(f.comm, m.rank) == lost) return;  // it answered RAS
      for (const RasMember& m : c->missing) {
        if (!m.unresponsive || sequences_.globalRank(f.comm, m.rank) != lost) continue;
        if (known_pid != 0 && m.pid > 0 && m.pid != known_pid) return;
        seen.push_back({s.rank, m, s.ras->asked_by == "ras-command"});
      }
    }
  }
  if (seen.empty()) return;
  nameMissingMembers(v, f, {lost});
  wording_.unansweredRas(v, f, lost, seen);
}

// A rank that dumped itself but whose node peer had found its process stopped before (the
// peer's observation kept in its state, hang_responder.h): frozen, then continued, as Slurm's
// and torchrun's teardown does (SIGCONT before SIGTERM). Its own dump shows where it stood;
// only the peer's look shows why it stood there. On a GPU job the same: /proc on the node.
void VerdictMaker::noteFrozenThenContinued(Verdict& v) const {
  std::vector<ExitedRank> frozen;
  for (const RankSummary& s : job_.ranks)
    if (s.state && s.state->stopped_seen_by && !s.state->exited_seen_by)
      frozen.push_back({s.rank, s.state->pid, s.state->host, s.state->device, *s.state->stopped_seen_by, true,
                        s.state->note});
  if (!frozen.empty()) wording_.frozenThenContinued(v, frozen);
}

bool VerdictMaker::insideInit(int rank) const {
  const RankSummary* s = job_.find(rank);
  return s && std::any_of(s->host_calls.begin(), s->host_calls.end(),
                          [](const SnapshotHostCall& h) { return h.joining && !h.joining->comm.empty(); });
}

// NCCL's init returns on no member until every member has called it (src/bootstrap.cc:
// bootstrapRoot collects every rank's handle before it answers any): ranks inside it for a
// communicator wait for the members no snapshot shows there. Evidence: the snapshots' host
// calls (`joining`, recorded by the init interposer: on a GPU job the blocking init looks the
// same). When the communicator spans the job, every process is a member, so a rank whose
// snapshot shows it outside is one that never called init; for a smaller one the snapshots do
// not say which processes its missing members are, so the ranks outside it are only suspects.
// A non-blocking init (config.blocking = 0) returns at once and is not seen here.
std::optional<Verdict> VerdictMaker::notFormed() const {
  std::map<std::string, FormingComm> forming;
  std::map<std::string, std::set<int>> comm_ranks_inside;
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotHostCall& h : s.host_calls) {
      if (!h.joining || h.joining->comm.empty() || h.joining->size <= 0) continue;
      FormingComm& c = forming[h.joining->comm];
      c.comm = h.joining->comm;
      c.size = h.joining->size;
      c.call = h.call;
      c.waiting.push_back(s.rank);
      c.oldest_s = std::max(c.oldest_s, h.age_s);
      comm_ranks_inside[c.comm].insert(h.joining->rank);
    }
  }
  if (forming.empty()) return std::nullopt;
  if (std::optional<Verdict> v = idsDisagree(forming, comm_ranks_inside)) return v;
  // The one most ranks wait for; of equals, the one they have waited for longest.
  FormingComm c = std::max_element(forming.begin(), forming.end(), [](const auto& a, const auto& b) {
                    return std::make_tuple(a.second.waiting.size(), a.second.oldest_s) <
                           std::make_tuple(b.second.waiting.size(), b.second.oldest_s);
                  })->second;
  std::sort(c.waiting.begin(), c.waiting.end());
  for (int r = 0; r < c.size; ++r)
    if (!comm_ranks_inside[c.comm].count(r)) c.absent.push_back(r);
  const std::set<int> inside(c.waiting.begin(), c.waiting.end());
  for (int r = 0; r < job_.world_size; ++r) {
    if (inside.count(r)) continue;
    const RankSummary* s = job_.find(r);
    // A rank whose process a node peer found gone is outside it as surely as one whose snapshot says so.
    // One that ended on the launcher's SIGTERM with nothing pending is no cause: said as silent.
    const bool exited = std::any_of(job_.ranks_exited.begin(), job_.ranks_exited.end(),
                                    [&](const ExitedRank& e) { return e.rank == r && !e.on_term; });
    (s && s->has_snapshot ? c.outside : exited ? c.exited : c.silent).push_back(r);
  }
  c.whole_job = job_.world_size > 0 && c.size == job_.world_size;

  Verdict v;
  v.communicator = c.comm;
  v.op = OpRef{c.call, std::nullopt};
  if (c.absent.empty()) {
    v.kind = VerdictKind::kInconclusive;
  } else if (c.whole_job && !(c.outside.empty() && c.exited.empty())) {
    v.kind = VerdictKind::kNonCommunicationHang;
    v.culprit_ranks = c.outside;
    v.culprit_ranks.insert(v.culprit_ranks.end(), c.exited.begin(), c.exited.end());
    std::sort(v.culprit_ranks.begin(), v.culprit_ranks.end());
    // They never called it whatever the silent ranks did; those may not have either.
    for (int r : c.silent) v.lacking_data.push_back(gapOf(r, ""));
  } else {
    // A member no snapshot shows may be inside it with its dump lost, or anywhere else.
    v.kind = c.whole_job ? VerdictKind::kNonCommunicationHang : VerdictKind::kInconclusive;
    v.confident = false;
    if (!c.whole_job) {
      for (int r : c.outside) v.suspects.push_back(rankSuspect(r));
      for (int r : c.exited) v.suspects.push_back(rankSuspect(r));
    }
    for (int r : c.silent) {
      v.suspects.push_back(rankSuspect(r, SuspectNote::kNoSnapshot));
      v.lacking_data.push_back(gapOf(r, ""));
    }
    sortSuspects(v.suspects);
  }
  wording_.notFormed(v, c);
  return v;
}

// NCCL's bootstrap joins the ranks that pass the same ncclUniqueId (bootstrap.cc: the id holds the
// root's address and a random magic): ranks given different ids wait in separate inits, each for
// members that are in the other. Evidence on any GPU job: the id each rank passed (`joining`,
// hashed by the init interposer) and the ids each process made (ncclGetUniqueId, interposed
// too). A communicator whose id a rank of this launch made is this launch's; one whose id none
// made came from elsewhere: typically the last attempt's id, read from a store the launcher kept
// across restarts (torchrun's shared TCPStore: pytorch#135712). Without a snapshot of every rank
// the maker may be a silent one: then only suspects.
std::optional<Verdict> VerdictMaker::idsDisagree(const std::map<std::string, FormingComm>& forming,
                                                 const std::map<std::string, std::set<int>>& positions_inside) const {
  std::map<std::string, std::vector<int>> makers;
  bool lists_full = false;  // a process made more ids than its snapshot keeps: older ones are not listed
  for (const RankSummary& s : job_.ranks) {
    for (const std::string& id : s.unique_ids_made) makers[id].push_back(s.rank);
    lists_full = lists_full || s.unique_ids_made.size() >= WatchdogSnapshot::kUniqueIdsKept;
  }
  // This launch's communicator (an id made here) that the strays' positions are missing from.
  auto ownFor = [&](const FormingComm& stray) -> const FormingComm* {
    const std::set<int>& held = positions_inside.at(stray.comm);
    for (const auto& [id, own] : forming) {
      if (!makers.count(id) || own.size != stray.size) continue;
      const std::set<int>& own_inside = positions_inside.at(id);
      if (std::none_of(held.begin(), held.end(), [&](int r) { return own_inside.count(r) > 0; })) return &own;
    }
    return nullptr;
  };
  std::vector<StrayInit> strays;
  const FormingComm* own = nullptr;
  for (const auto& [id, f] : forming) {
    if (makers.count(id)) continue;
    auto earlier = job_.ids_made_earlier.find(id);
    const FormingComm* waits = ownFor(f);
    if (earlier == job_.ids_made_earlier.end() && waits == nullptr) continue;
    strays.push_back({f, earlier == job_.ids_made_earlier.end() ? std::nullopt : std::optional(earlier->second)});
    if (own == nullptr) own = waits;
  }
  if (strays.empty()) return std::nullopt;
  Verdict v;
  v.kind = VerdictKind::kNonCommunicationHang;
  v.communicator = own ? own->comm : strays.front().comm.comm;
  v.op = OpRef{strays.front().comm.call, std::nullopt};
  for (const StrayInit& s : strays)
    v.culprit_ranks.insert(v.culprit_ranks.end(), s.comm.waiting.begin(), s.comm.waiting.end());
  std::sort(v.culprit_ranks.begin(), v.culprit_ranks.end());
  // An id an earlier launch made is certain; one no rank that dumped made may be a silent rank's.
  const bool certain = std::all_of(strays.begin(), strays.end(), [](const StrayInit& s) { return s.earlier.has_value(); });
  if (!certain && (!job_.ranks_missing.empty() || lists_full)) {
    v.confident = false;
    for (int r : v.culprit_ranks) v.suspects.push_back(rankSuspect(r));
    for (int r : job_.ranks_missing) {
      v.suspects.push_back(rankSuspect(r, SuspectNote::kNoSnapshot));
      v.lacking_data.push_back(gapOf(r, ""));
    }
    sortSuspects(v.suspects);
  }
  wording_.idsDisagree(v, strays, own, own ? makers[own->comm] : std::vector<int>{});
  if (!v.confident) v.culprit_ranks.clear();
  return v;
}

// Fewer than half the ranks answered: whatever the rules named is only a suspect.
void VerdictMaker::hedgeTooFewAnswered(Verdict& v) const {
  const int answered = static_cast<int>(job_.ranks.size());
  if (v.kind == VerdictKind::kNoHang || job_.world_size <= 0 || answered * 2 >= job_.world_size) return;
  // Worded first: what the partial data pointed to is the verdict as it stands now.
  wording_.tooFewAnswered(v, answered, v.culprit_link || !v.culprit_ranks.empty());
  v.kind = VerdictKind::kInconclusive;
  if (v.suspects.empty()) {
    if (v.culprit_link) v.suspects.push_back(linkSuspect(*v.culprit_link));
    else
      for (int r : v.culprit_ranks) v.suspects.push_back(rankSuspect(r));
  }
  v.confident = false;
  v.lacking_data.clear();
  for (int r : job_.ranks_missing) v.lacking_data.push_back(gapOf(r, v.communicator));
  v.culprit_ranks.clear();
  v.culprit_link.reset();
}

Verdict VerdictMaker::noDumps() const {
  Verdict v;
  const EmptyJob what = job_.trigger                                                 ? EmptyJob::kTriggeredNoDumps
                        : job_.metrics_files > 0 || !job_.trigger_problem.empty() ? EmptyJob::kNoSnapshotDumped
                                                                                    : EmptyJob::kNothing;
  const bool no_hang = what == EmptyJob::kNoSnapshotDumped && job_.trigger_problem.empty();
  v.kind = no_hang ? VerdictKind::kNoHang : VerdictKind::kInconclusive;
  wording_.noDumps(v, what);
  return v;
}

Verdict VerdictMaker::nothingPending() const {
  Verdict v;
  v.kind = VerdictKind::kNoHang;
  wording_.nothingPending(v);
  return v;
}

Verdict VerdictMaker::mismatch(const HangFocus& f, const CommPositions& p) const {
  Verdict v;
  v.kind = VerdictKind::kCollectiveMismatch;
  v.communicator = f.comm;
  v.op = OpRef{p.groups.empty() ? f.op : p.groups.front().op, f.seq};
  std::vector<int> odd;
  for (size_t i = 1; i < p.groups.size(); ++i) odd.insert(odd.end(), p.groups[i].ranks.begin(), p.groups[i].ranks.end());
  // With two equal groups there is no majority: every rank of both is named.
  if (p.groups.size() > 1 && p.groups[0].ranks.size() == p.groups[1].ranks.size()) {
    odd.insert(odd.end(), p.groups[0].ranks.begin(), p.groups[0].ranks.end());
  }
  std::sort(odd.begin(), odd.end());
  v.culprit_ranks = odd;
  wording_.mismatch(v, f, p, odd);
  hedgeMismatch(v, p, f);
  // Without a majority nothing says which side ran what the program meant: each side is a
  // suspect (two ranks of a pipeline pair, or two halves of a group).
  if (v.confident && p.groups.size() > 1 && p.groups[0].ranks.size() == p.groups[1].ranks.size()) {
    v.confident = false;
    v.culprit_ranks.clear();
    for (const OpGroup& g : p.groups) v.suspects.push_back(groupSuspect(g));
    v.hinges_on = "which side called the collective the program meant to: as many ranks called one as the other";
  }
  return v;
}

// The members called different collectives at position d.seq and went on out of step: the
// hang at f is where it surfaced. Judged as a mismatch at d.seq, where a member with a snapshot
// whose record no longer reaches that far counts as one that could be on either side.
Verdict VerdictMaker::divergedEarlier(const HangFocus& f, const CommPositions& here, const Divergence& d) const {
  HangFocus at{f.comm, d.seq, d.groups.front().op, f.source, {}};
  CommPositions p;
  p.groups = d.groups;
  p.comm_size = here.comm_size;
  p.members_missing = here.members_missing;
  p.members_missing.insert(p.members_missing.end(), d.unknown.begin(), d.unknown.end());
  Verdict v = mismatch(at, p);
  wording_.divergedEarlier(v, f, d);
  return v;
}

void VerdictMaker::hedgeMismatch(Verdict& v, const CommPositions& p, const HangFocus& f) const {
  if (p.members_missing.empty() || p.groups.size() < 2) return;
  size_t largest = p.groups[0].ranks.size(), second = p.groups[1].ranks.size();
  if (second + p.members_missing.size() < largest) return;
  // The ranks without a snapshot could all be in the smaller group: then it is the majority.
  v.confident = false;
  for (int r : p.members_missing) v.lacking_data.push_back(gapOf(r, f.comm));
  for (const OpGroup& g : p.groups) v.suspects.push_back(groupSuspect(g));
  v.culprit_ranks.clear();
  wording_.mismatchUndecided(v, f, p);
}

Verdict VerdictMaker::notInCollective(const HangFocus& f, const CommPositions& p, const std::vector<int>& culprits) const {
  Verdict v;
  v.kind = VerdictKind::kNonCommunicationHang;
  v.communicator = f.comm;
  v.op = OpRef{f.op, f.seq};
  v.culprit_ranks = culprits;
  std::vector<int> waiting;
  for (const OpGroup& g : p.groups) waiting.insert(waiting.end(), g.ranks.begin(), g.ranks.end());
  waiting.insert(waiting.end(), p.in_host_call.begin(), p.in_host_call.end());
  std::sort(waiting.begin(), waiting.end());
  // The ranks named never called it whatever the others did; the silent ones may not have either.
  for (int r : p.members_missing) v.lacking_data.push_back(gapOf(r, f.comm));
  wording_.notInCollective(v, f, p, culprits, waiting);
  return v;
}

// Communicators that wait on each other: the ranks behind here are held by an overdue
// collective elsewhere that waits, in turn, for ranks held here. Ranks issuing collectives on
// two communicators in different orders do this, and so can a fault in either collective:
// nothing here says which, so the ranks are suspects.
Verdict VerdictMaker::waitsAcrossCommunicators(const HangFocus& f, const CommPositions& p, const HangFocus& held) const {
  Verdict v;
  v.kind = VerdictKind::kInconclusive;
  v.confident = false;
  v.communicator = f.comm;
  v.op = OpRef{f.op, f.seq};
  std::vector<int> involved = p.behind;
  for (const OpGroup& g : p.groups) involved.insert(involved.end(), g.ranks.begin(), g.ranks.end());
  std::sort(involved.begin(), involved.end());
  for (int r : involved) v.suspects.push_back(rankSuspect(r));
  wording_.waitsAcrossCommunicators(v, f, p, held);
  return v;
}

RingFacts VerdictMaker::ringFacts(const HangFocus& f, const CommPositions& p) const {
  RingFacts facts{f, p, {}, {}, {}, 0, {}, RingGap::kNone, {}, std::nullopt};
  auto to_global = [&](int comm_rank) { return sequences_.globalRank(f.comm, comm_rank); };
  RingProgressAnalysis ring(to_global);
  const std::set<int> finished(p.finished.begin(), p.finished.end());
  GraphProgressAnalysis graph(to_global, [&](int comm_rank) { return finished.count(to_global(comm_rank)) > 0; });
  // The focus communicator's records; a reader that saw only NCCL's own id (nccl-host, cuda)
  // is joined through its rank's comms[].nccl_id, so every record source reaches the analysis.
  std::vector<const RingProgress*> records;
  std::deque<RingProgress> joined;
  bool graph_read = false;
  std::set<std::string> kernel_algorithms;
  for (const RankSummary& s : job_.ranks) {
    bool any = false;
    for (const RingProgress& r : s.ring_progress) {
      if (isTransferRecord(r)) continue;
      const bool join = r.comm.empty() && !r.nccl_comm.empty();
      const std::string comm = join ? watchdogHashOf(s, r.nccl_comm) : r.comm;
      if (comm != f.comm) continue;
      if (!r.algorithm.empty() && r.algorithm != "RING") kernel_algorithms.insert(r.algorithm);
      graph_read = graph_read || GraphProgressAnalysis::readsGraph(r);
      any = true;
      if (!join) {
        records.push_back(&r);
        continue;
      }
      joined.push_back(r);
      joined.back().comm = comm;
      records.push_back(&joined.back());
    }
    facts.ranks_with_records += any;
    if (any) facts.with_records.push_back(s.rank);
  }
  std::sort(facts.with_records.begin(), facts.with_records.end());
  facts.kernel_algorithms.assign(kernel_algorithms.begin(), kernel_algorithms.end());
  // A reader that saw every connection of the algorithm's graph decides on that graph; its
  // records without connections (a rank whose threads wait on none) belong to it too.
  for (const RingProgress* r : records) graph_read ? graph.add(*r) : ring.add(*r);
  if (graph_read) {
    fromGraph(facts, graph.analyze(f.comm, f.seq));
  } else {
    facts.ring = ring.analyze(f.comm, f.seq, p.comm_size);
    if (facts.ring.channels_total == 0) facts.ring = ring.analyze(f.comm, std::nullopt, p.comm_size);
  }
  for (const OpGroup& g : p.groups) facts.waiting.insert(facts.waiting.end(), g.ranks.begin(), g.ranks.end());
  facts.waiting.insert(facts.waiting.end(), p.in_host_call.begin(), p.in_host_call.end());
  std::sort(facts.waiting.begin(), facts.waiting.end());
  // The second source: NCCL's own profiler events in the snapshots (no debugger).
  std::vector<int> members = facts.waiting;
  members.insert(members.end(), p.finished.begin(), p.finished.end());
  members.insert(members.end(), p.members_missing.begin(), p.members_missing.end());
  ProxyProgressAnalysis proxy(job_, [&](int comm_rank) { return sequences_.globalRank(f.comm, comm_rank); });
  // Inside a node NCCL's profiler sees no link, and no profiler fact tells which rank's GPU stopped
  // there: NCCL returns from the call once the work is queued and every waiting rank's kernel
  // channels start and never stop, so the stop stays narrowed to the node.
  facts.proxy = proxy.analyze(f.comm, members);
  return facts;
}

// The debugger read the collective on its algorithm's own graph: that finding is the
// debugger's, in the shape the rest of the decision reads (named link or rank, channels).
void VerdictMaker::fromGraph(RingFacts& facts, GraphFinding g) const {
  RingFinding rf;
  rf.link = g.link;
  rf.rank = g.rank;
  rf.channels_agree = g.channels_agree;
  rf.channels_total = g.channels_total;
  rf.credit_lost = g.stop && g.stop->kind == GraphStop::Kind::kCreditLost;
  rf.note = g.note;
  for (const GraphStop& s : g.several)
    if (s.link) rf.least_seen.push_back(*s.link);
  facts.ring = std::move(rf);
  facts.graph = std::move(g);
}

Verdict VerdictMaker::fromRingProgress(const HangFocus& f, const CommPositions& p) const {
  RingFacts facts = ringFacts(f, p);
  Verdict v;
  v.communicator = f.comm;
  v.op = OpRef{f.op, f.seq};
  wording_.ringWaiting(v, facts);
  const RingFinding& rf = facts.ring;
  const ProxyFinding& pf = facts.proxy;
  const bool debugger_named = rf.link || rf.rank;
  const bool profiler_named = pf.link || pf.rank;
  const bool same = (rf.link && pf.link && *rf.link == *pf.link) || (rf.rank && pf.rank && *rf.rank == *pf.rank);
  if (debugger_named && profiler_named && !same) return sourcesDisagree(std::move(v), rf, pf);
  if (debugger_named) {
    weighProfiler(v, facts, profiler_named);
  } else if (profiler_named) {
    // Nothing from the debugger names anyone: the profiler's view decides.
    v.source = "profiler";
    facts.ring = RingFinding{};
    facts.ring.link = pf.link;
    facts.ring.rank = pf.rank;
    facts.ring.channels_agree = pf.channels_agree;
    facts.ring.channels_total = pf.channels_total;
  }
  v.channels_total = facts.ring.channels_total;
  v.channels_agree = facts.ring.channels_agree;
  if (facts.ring.link) {
    blameRingLink(v, facts);
  } else if (facts.ring.rank) {
    v.kind = VerdictKind::kCommunicationHang;
    v.culprit_ranks = {*facts.ring.rank};
    if (sequences_.sharedByProcess(f.comm)) v.culprit_ranks = processesOf(f.comm, v.culprit_ranks);
    if (facts.graph && v.source != "profiler") wording_.graphRankCulprit(v, facts);
    else wording_.ringRankCulprit(v, facts);
  } else {
    ringUndecided(v, facts);
  }
  hedgeRing(v, facts);
  hedgeFinishedReceiver(v, facts);
  hedgeOtherAlgorithms(v, facts);
  return v;
}

// On a ring every member of an AllReduce, AllGather or ReduceScatter needs every step its
// predecessor sends to finish: a named link whose receiver finished the collective its peers
// still wait in delivered what that collective needed, and a dead link does not explain the
// hang. A receiver that ran another collective of the same kind at that position does (one
// all-reduce more, or one of another size: NCCL checks no sizes), so both are suspects.
void VerdictMaker::hedgeFinishedReceiver(Verdict& v, const RingFacts& facts) const {
  if (!v.confident || !v.culprit_link || v.link_in_comm_ranks || !facts.kernel_algorithms.empty()) return;
  const std::string& op = facts.focus.op;
  if (op != "ncclAllReduce" && op != "ncclAllGather" && op != "ncclReduceScatter") return;
  const std::vector<int>& finished = facts.positions.finished;
  const Link link = *v.culprit_link;
  if (std::find(finished.begin(), finished.end(), link.to) == finished.end()) return;
  v.kind = VerdictKind::kInconclusive;
  v.confident = false;
  v.suspects = {linkSuspect(link), rankSuspect(link.to)};
  sortSuspects(v.suspects);
  wording_.linkReceiverFinished(v, link);
  v.culprit_link.reset();
  v.culprit_ranks.clear();
}

// The debugger named a culprit: NCCL's profiler events confirm it, narrow the stop to
// nodes that hold it, or put the stop elsewhere (then the verdict is not sure).
void VerdictMaker::weighProfiler(Verdict& v, const RingFacts& facts, bool profiler_named) const {
  const RingFinding& rf = facts.ring;
  const ProxyFinding& pf = facts.proxy;
  v.source = profiler_named ? "debugger and profiler" : "debugger";
  if (profiler_named) {
    wording_.ringProfilerView(v, facts, ProfilerView::kSame);
    return;
  }
  if (pf.narrowed.empty()) return;
  auto inside = [&](int r) { return std::find(pf.narrowed.begin(), pf.narrowed.end(), r) != pf.narrowed.end(); };
  if (rf.link ? inside(rf.link->from) || inside(rf.link->to) : inside(*rf.rank)) {
    v.source = "debugger and profiler";
    wording_.ringProfilerView(v, facts, ProfilerView::kNarrowedAgrees);
  } else {
    v.confident = false;
    wording_.ringProfilerView(v, facts, ProfilerView::kNarrowedDisagrees);
  }
}

void VerdictMaker::blameRingLink(Verdict& v, const RingFacts& facts) const {
  const Link& l = *facts.ring.link;
  v.kind = VerdictKind::kCommunicationHang;
  v.culprit_link = l;
  v.link_in_comm_ranks = sequences_.sharedByProcess(facts.focus.comm);
  v.culprit_ranks = {l.from, l.to};
  std::sort(v.culprit_ranks.begin(), v.culprit_ranks.end());
  if (v.link_in_comm_ranks) v.culprit_ranks = processesOf(facts.focus.comm, v.culprit_ranks);
  if (facts.graph && v.source != "profiler") wording_.graphLinkCulprit(v, facts);
  else wording_.ringLinkCulprit(v, facts);
}

// Ring progress named nobody: why, what the verdict hinges on, and who is left suspect.
void VerdictMaker::ringUndecided(Verdict& v, RingFacts& facts) const {
  const CommPositions& p = facts.positions;
  const ProxyFinding& pf = facts.proxy;
  const bool narrowed = facts.ranks_with_records == 0 && !pf.narrowed.empty();
  facts.gap = !p.members_missing.empty()       ? RingGap::kMembersMissing
              : narrowed                       ? RingGap::kNarrowedByProfiler
              : facts.ranks_with_records == 0 ? RingGap::kNoRecords
                                               : RingGap::kNamesNothing;
  v.kind = VerdictKind::kInconclusive;
  if (facts.gap == RingGap::kNarrowedByProfiler) v.source = "profiler";
  wording_.ringInconclusive(v, facts);
  v.confident = false;
  switch (facts.gap) {
    case RingGap::kMembersMissing:
      for (int r : p.members_missing) {
        v.lacking_data.push_back(gapOf(r, facts.focus.comm));
        v.suspects.push_back(rankSuspect(r, SuspectNote::kNoSnapshot));
      }
      break;
    case RingGap::kNarrowedByProfiler:
      v.suspects.push_back(nodeSuspect(pf.narrowed));
      break;
    case RingGap::kNoRecords:
      for (int r : facts.waiting) v.lacking_data.push_back(gapOf(r, facts.focus.comm));
      if (!pf.members_host.empty()) v.suspects.push_back(nodeSuspect(pf.members_on_host));
      // NCCL's profiler bounds a stop in every node: each node holds one, or one starves them all.
      for (const std::vector<int>& node : pf.every_node) v.suspects.push_back(nodeSuspect(node));
      break;
    case RingGap::kNamesNothing:
    case RingGap::kNone:
      if (facts.graph && (!facts.graph->several.empty() || !facts.graph->unread.empty())) {
        // The waits end in more than one place, or at ranks the debugger read nothing of.
        for (const GraphStop& s : facts.graph->several)
          v.suspects.push_back(s.link ? linkSuspect(*s.link) : rankSuspect(*s.rank, SuspectNote::kDebugger));
        for (int r : facts.graph->unread) v.lacking_data.push_back(gapOf(r, facts.focus.comm));
        sortSuspects(v.suspects);
        break;
      }
      if (!facts.ring.least_seen.empty()) {
        // The debugger's records: the connections with the least progress share no rank, so
        // the ring stopped in more than one place (two faults); each of them is a suspect.
        for (const Link& l : facts.ring.least_seen) v.suspects.push_back(linkSuspect(l));
        sortSuspects(v.suspects);
        break;
      }
      v.confident = true;  // the data is all there; it just names nothing
      break;
  }
  // NCCL's profiler: more than one link holds steps on the wire (each sender handed data to
  // the network that never completed), so the ring lost data in more than one place; each such
  // link is a suspect, whatever else narrowed the stop.
  if (pf.wire_links.size() > 1) {
    for (const Link& l : pf.wire_links)
      if (std::none_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) { return s.link == l; }))
        v.suspects.push_back(linkSuspect(l));
    sortSuspects(v.suspects);
    v.confident = false;
    if (v.hinges_on.empty()) v.hinges_on = "which of the links holding steps on the wire stopped first";
    if (v.source.empty()) v.source = "profiler";
  }
}

// A named culprit is only as sure as the data around it: ring connections nobody reported,
// or a culprit rank without its own snapshot.
void VerdictMaker::hedgeRing(Verdict& v, const RingFacts& facts) const {
  const RingFinding& rf = facts.ring;
  if (v.culprit_link && !v.link_in_comm_ranks && v.source == "profiler") {
    // Over sockets a sender whose receiving host died waits with its data queued, as on a
    // dead link: an end that wrote no snapshot leaves the two apart only as suspects. (The
    // debugger's ring records have their own hedges for ranks without data, below.)
    std::vector<int> silent;
    for (int r : {v.culprit_link->from, v.culprit_link->to}) {
      const RankSummary* s = job_.find(r);
      if (r >= 0 && (s == nullptr || !s->has_snapshot)) silent.push_back(r);
    }
    if (!silent.empty()) {
      v.kind = VerdictKind::kInconclusive;
      v.confident = false;
      v.suspects.push_back(linkSuspect(*v.culprit_link));
      for (int r : silent) {
        v.suspects.push_back(rankSuspect(r, SuspectNote::kNoSnapshot));
        v.lacking_data.push_back(gapOf(r, facts.focus.comm));
      }
      sortSuspects(v.suspects);
      wording_.linkEndSilent(v, *v.culprit_link, silent);
      v.culprit_link.reset();
      v.culprit_ranks.clear();
      return;
    }
  }
  // A tree's ranks report their tree peers, never a ring's prev and next: ring links no rank
  // reported are missing data only on a ring (hedgeOtherAlgorithms hedges a tree).
  if (!rf.unseen.empty() && v.source != "profiler" && facts.kernel_algorithms.empty()) {
    hedgeUnseenLinks(v, rf, facts.focus);
    return;
  }
  if (!rf.rank || v.culprit_ranks.size() != 1) return;
  const RankSummary* s = job_.find(*rf.rank);
  if (s && s->has_snapshot) return;
  // Its neighbours show it stopped; only its own snapshot tells a dead GPU from a rank that never came.
  v.confident = false;
  v.lacking_data.push_back(gapOf(*rf.rank, facts.focus.comm));
  v.suspects.push_back(rankSuspect(*rf.rank));
  wording_.culpritWithoutSnapshot(v, *rf.rank);
}

void VerdictMaker::hedgeOtherAlgorithms(Verdict& v, const RingFacts& facts) const {
  const ProxyFinding& pf = facts.proxy;
  if (pf.other_algorithms.empty() && facts.kernel_algorithms.empty()) return;
  if (facts.graph) {
    // The debugger read the algorithm's own connections: no ring shape stood in for them.
    wording_.graphRead(v, facts);
    return;
  }
  // Both ends of a link on the wire show it, whatever the algorithm's shape.
  const bool wire = pf.link && v.culprit_link && *pf.link == *v.culprit_link;
  const bool named = v.kind == VerdictKind::kCommunicationHang && !wire;
  if (named) {
    std::vector<Suspect> suspects;
    if (v.culprit_link) suspects.push_back(linkSuspect(*v.culprit_link));
    else
      for (int r : v.culprit_ranks) suspects.push_back(rankSuspect(r, SuspectNote::kDebugger));
    if (!pf.narrowed.empty()) suspects.push_back(nodeSuspect(pf.narrowed));
    // Waiting ranks the debugger read nothing from: their own connections are unknown.
    if (!facts.kernel_algorithms.empty() && facts.ranks_with_records > 0)
      for (int r : facts.waiting)
        if (!std::binary_search(facts.with_records.begin(), facts.with_records.end(), r)) {
          suspects.push_back(rankSuspect(r));
          v.lacking_data.push_back(gapOf(r, facts.focus.comm));
        }
    for (Suspect& s : v.suspects) suspects.push_back(std::move(s));
    sortSuspects(suspects);
    v.suspects = std::move(suspects);
    v.kind = VerdictKind::kInconclusive;
    v.confident = false;
    v.culprit_link.reset();
    v.culprit_ranks.clear();
  } else if (v.kind == VerdictKind::kInconclusive && v.suspects.empty() && !pf.narrowed.empty()) {
    // The debugger's records named nobody on a tree; NCCL's profiler still put the stop in a node.
    v.suspects.push_back(nodeSuspect(pf.narrowed));
    v.confident = false;
  }
  wording_.otherAlgorithms(v, facts, named);
}

Verdict VerdictMaker::sourcesDisagree(Verdict v, const RingFinding& rf, const ProxyFinding& pf) const {
  v.kind = VerdictKind::kInconclusive;
  v.source = "debugger and profiler";
  v.confident = false;
  v.channels_agree = rf.channels_agree;
  v.channels_total = rf.channels_total;
  v.suspects.push_back(rf.link ? linkSuspect(*rf.link) : rankSuspect(*rf.rank, SuspectNote::kDebugger));
  v.suspects.push_back(pf.link ? linkSuspect(*pf.link) : rankSuspect(*pf.rank, SuspectNote::kProfiler));
  sortSuspects(v.suspects);
  wording_.sourcesDisagree(v, rf, pf);
  return v;
}

std::string VerdictMaker::stuckP2pComm() const {
  for (const RankSummary& s : job_.ranks)
    for (const SnapshotPendingOp& op : s.pending)
      if (op.op_class == "p2p" && !op.comm.empty() && s.timeout_s > 0 && op.age_s >= s.timeout_s) return op.comm;
  return "";
}

std::vector<int> VerdictMaker::processesOf(const std::string& comm, const std::vector<int>& comm_ranks) const {
  std::set<int> out;
  for (int r : comm_ranks) {
    const RankSummary* owner = nullptr;
    if (sequences_.commEntry(comm, r, &owner) && owner) out.insert(owner->rank);
  }
  return {out.begin(), out.end()};
}

Verdict VerdictMaker::fromP2p(const std::string& comm, const ChainEnd* pair) const {
  Verdict v;
  v.communicator = comm;
  v.op = OpRef{"ncclSend/ncclRecv", std::nullopt};
  const bool shared = sequences_.sharedByProcess(comm);
  wording_.p2pWaits(v, comm);
  std::vector<int> members(std::max(0, sequences_.commSize(comm)));
  for (size_t i = 0; i < members.size(); ++i) members[i] = sequences_.globalRank(comm, static_cast<int>(i));
  ProxyProgressAnalysis proxy(job_, [&](int comm_rank) { return sequences_.globalRank(comm, comm_rank); });
  const ProxyFinding pf = proxy.analyze(comm, members);
  if (pf.link) {
    v.kind = VerdictKind::kCommunicationHang;
    v.source = "profiler";
    v.culprit_link = pf.link;
    v.link_in_comm_ranks = shared;
    v.culprit_ranks = shared ? processesOf(comm, {pf.link->from, pf.link->to})
                             : std::vector<int>{std::min(pf.link->from, pf.link->to), std::max(pf.link->from, pf.link->to)};
    v.channels_agree = pf.channels_agree;
    v.channels_total = pf.channels_total;
    wording_.p2pLinkCulprit(v, comm, pf);
    return v;
  }
  v.kind = VerdictKind::kInconclusive;
  v.confident = false;
  if (pair != nullptr) {
    v.suspects = {linkSuspect({pair->from, pair->to})};
    // A send and a receive between the same two ranks in one group run as one kernel, timed as
    // one: the snapshots do not say which half waits, so a transfer the other way pending at
    // either end makes that direction as suspect. Its sender may have finished its half: a send
    // that fits the receiver's buffers completes before the data arrives, on NCCL as here.
    const bool both_ways = pendingTransfer(comm, pair->to, pair->from, true) ||
                           pendingTransfer(comm, pair->from, pair->to, false);
    if (both_ways) v.suspects.push_back(linkSuspect({pair->to, pair->from}));
    wording_.p2pPairUndecided(v, *pair, pf, both_ways);
    return v;
  }
  wording_.p2pInconclusive(v, comm, pf);
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotPendingOp& op : s.pending) {
      if (op.comm != comm || op.op != "ncclRecv" || !op.peer) continue;
      const int me = shared ? -1 : s.rank;
      if (me >= 0) v.suspects.push_back(linkSuspect({sequences_.globalRank(comm, *op.peer), me}));
    }
  }
  return v;
}

// Whether `rank` has a send to (or a receive from) global rank `peer` pending on `comm`.
bool VerdictMaker::pendingTransfer(const std::string& comm, int rank, int peer, bool send) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return false;
  return std::any_of(s->pending.begin(), s->pending.end(), [&](const SnapshotPendingOp& op) {
    return op.comm == comm && op.op_class == "p2p" && op.peer && sequences_.globalRank(comm, *op.peer) == peer &&
           (op.op == "ncclSend") == send;
  });
}

DataGap VerdictMaker::gapOf(int rank, const std::string& comm) const {
  DataGap g;
  g.rank = rank;
  if (const RankSummary* s = job_.find(rank)) {
    g.lacks = s->lacking(comm);
    if (g.lacks.empty()) {
      const bool unreadable = std::any_of(s->ring_progress.begin(), s->ring_progress.end(), [&](const RingProgress& r) {
        return (r.recv && !r.recv->observed_known) || (r.send && !r.send->observed_known);
      });
      g.lacks = missingDataText(unreadable ? MissingData::kUnreadableCounter : MissingData::kNoCounter);
    }
  } else {
    bool collecting = std::find(job_.ranks_collecting.begin(), job_.ranks_collecting.end(), rank) != job_.ranks_collecting.end();
    g.lacks = missingDataText(collecting ? MissingData::kStillCollecting : MissingData::kNoDump);
  }
  return g;
}

void VerdictMaker::hedgeUnseenLinks(Verdict& v, const RingFinding& rf, const HangFocus& f) const {
  std::vector<int> dark;
  for (const Link& l : rf.unseen) {
    dark.push_back(l.from);
    if (l.to >= 0) dark.push_back(l.to);
  }
  std::sort(dark.begin(), dark.end());
  dark.erase(std::unique(dark.begin(), dark.end()), dark.end());
  std::vector<DataGap> gaps;
  for (int r : dark) gaps.push_back(gapOf(r, f.comm));

  std::vector<Suspect> suspects;
  if (rf.link) {
    suspects.push_back(linkSuspect(*rf.link));
  } else if (rf.rank) {
    suspects.push_back(rankSuspect(*rf.rank));
  } else {
    for (const Link& l : rf.least_seen) suspects.push_back(linkSuspect(l));
  }
  for (const Link& l : rf.unseen) suspects.push_back(linkSuspect(l));
  sortSuspects(suspects);
  v.kind = VerdictKind::kInconclusive;
  v.culprit_link.reset();
  v.culprit_ranks.clear();
  v.confident = false;
  v.suspects = std::move(suspects);
  v.lacking_data = std::move(gaps);
  wording_.unseenLinks(v, rf, dark);
}

void VerdictMaker::addCulpritStacks(Verdict& v) const {
  // A communication hang's culprit waits like everyone else: its stacks say nothing more.
  if (v.kind != VerdictKind::kNonCommunicationHang && v.kind != VerdictKind::kCollectiveMismatch) return;
  // Threads of the culprit whose stack no rank of the largest class has are where it differs.
  std::set<std::vector<std::string>> usual;
  if (!classes_.empty()) {
    for (const auto& st : classes_.front().thread_stacks) usual.insert(st);
  }
  for (int r : v.culprit_ranks) {
    const RankSummary* s = job_.find(r);
    if (!s || !s->has_forensics) continue;
    bool majority = !classes_.empty() && classes_.front().ranks.contains(r) && classes_.size() > 1;
    // The main thread first: a dump lists threads by id, and once pid numbers wrap a thread the
    // rank started later (PyTorch's watchdog, named like the process) can sort before it.
    std::vector<const stackmerge::RankThread*> order;
    for (const stackmerge::RankThread& t : s->threads) order.push_back(&t);
    std::stable_partition(order.begin(), order.end(),
                          [&](const stackmerge::RankThread* t) { return t->tid == s->pid; });
    int shown = 0;
    for (const stackmerge::RankThread* tp : order) {
      const stackmerge::RankThread& t = *tp;
      std::span<const stackmerge::TableFrame> frames = job_.stacks->frames(t.stack);
      if (isInfrastructureThread(t.name) || frames.empty()) continue;
      bool main_thread = t.tid == s->pid;
      if (!main_thread && (majority || usual.count(job_.stacks->labels(t.stack)))) continue;
      v.where.push_back({r, threadText(t.name, t.tid), whereFrames(frames)});
      if (++shown >= 3) break;
    }
  }
  wording_.whereCulpritsAre(v);
}

}  // namespace hangwatch::verdict
