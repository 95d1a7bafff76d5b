#include "hangwatch/verdict/wait_chain.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace hangwatch::verdict {
namespace {

bool isSend(const SnapshotPendingOp& op) { return op.op == "ncclSend"; }

std::string opAt(const SnapshotPendingOp& op) { return op.seq ? fmt::format("{} seq {}", op.op, *op.seq) : op.op; }

std::string described(const SnapshotPendingOp& op, int peer_global) {
  if (op.op_class != "p2p" || !op.peer) return fmt::format("{} on communicator {}", opAt(op), op.comm);
  return fmt::format("{} {} rank {} on communicator {}", op.op, isSend(op) ? "to" : "from", peer_global, op.comm);
}

const SnapshotComm* entryOf(const RankSummary& s, const std::string& comm) {
  for (const SnapshotComm& c : s.comms)
    if (c.hash == comm && c.rank >= 0) return &c;
  return nullptr;
}

bool pendingAt(const RankSummary& s, const std::string& comm, uint64_t seq) {
  return std::any_of(s.pending.begin(), s.pending.end(),
                     [&](const SnapshotPendingOp& op) { return op.comm == comm && op.seq && *op.seq == seq; });
}

ChainEnd stopped(std::string why) {
  ChainEnd e;
  e.kind = ChainEnd::Kind::kStopped;
  e.why = std::move(why);
  return e;
}

ChainEnd ended(ChainEnd::Kind kind, HangFocus at, int rank = -1, int waiter = -1) {
  ChainEnd e;
  e.kind = kind;
  e.at = std::move(at);
  e.rank = rank;
  e.waiter = waiter;
  return e;
}

// A host thread blocked in an NCCL call (an init, a blocking group end): not in host code of
// its own, and not at any operation either.
bool inNcclCall(const RankSummary& s) { return !s.host_calls.empty(); }

}  // namespace

struct WaitChain::Walk {
  HangFocus origin;
  std::set<std::tuple<int, std::string, std::string, uint64_t>> followed;  // rank, comm, op, seq
};

const SnapshotPendingOp* WaitChain::head(int rank) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return nullptr;
  const SnapshotPendingOp* best = nullptr;
  for (const SnapshotPendingOp& op : s->pending)
    if (op.gpu_started && (best == nullptr || op.age_s > best->age_s)) best = &op;
  return best;
}

std::vector<int> WaitChain::members(const std::string& comm) const {
  std::vector<int> out;
  for (int i = 0; i < seq_.commSize(comm); ++i) out.push_back(seq_.globalRank(comm, i));
  return out;
}

ChainEnd WaitChain::fromCollective(const HangFocus& focus) const {
  if (seq_.sharedByProcess(focus.comm)) return {};
  Walk w;
  w.origin = focus;
  // A member that has the collective queued behind other work its GPU runs, or that never
  // issued it while its GPU runs a transfer: it is not in it, and what it runs is where to look.
  for (int m : members(focus.comm)) {
    const RankSummary* s = job_.find(m);
    const SnapshotPendingOp* h = head(m);
    if (s == nullptr || h == nullptr || (h->comm == focus.comm && h->seq && *h->seq == focus.seq)) continue;
    if (h->comm.empty()) continue;
    const SnapshotComm* c = entryOf(*s, focus.comm);
    const bool queued = pendingAt(*s, focus.comm, focus.seq);
    const bool never = c != nullptr && (!c->last_issued_seq || *c->last_issued_seq < focus.seq);
    if (queued)
      return follow(w, m,
                    fmt::format("rank {} has {} seq {} on communicator {} queued behind work its GPU runs", m, focus.op,
                                focus.seq, focus.comm));
    if (never && h->op_class == "p2p")
      return follow(
          w, m, fmt::format("rank {} never called {} seq {} on communicator {}", m, focus.op, focus.seq, focus.comm));
  }
  return {};
}

ChainEnd WaitChain::fromTransfers() const {
  int start = -1;
  double oldest = -1;
  for (const RankSummary& s : job_.ranks) {
    const SnapshotPendingOp* h = head(s.rank);
    if (h && h->op_class == "p2p" && h->age_s > oldest) {
      oldest = h->age_s;
      start = s.rank;
    }
  }
  if (start < 0) return {};
  Walk w;
  w.origin.source = "pending operations";
  return follow(w, start, "");
}

std::vector<WaitChain::Owed> WaitChain::owedTransfers() const {
  std::vector<Owed> out;
  for (const RankSummary& s : job_.ranks) {
    const SnapshotPendingOp* h = head(s.rank);
    if (h == nullptr || h->op_class != "p2p" || !h->peer || s.timeout_s <= 0 || h->age_s < s.timeout_s ||
        seq_.sharedByProcess(h->comm))
      continue;
    const int peer = seq_.globalRank(h->comm, *h->peer);
    const RankSummary* theirs = job_.find(peer);
    if (peer == s.rank || theirs == nullptr || head(peer) != nullptr || inNcclCall(*theirs)) continue;
    out.push_back({s.rank, peer, h->comm, h->op});
  }
  return out;
}

ChainEnd WaitChain::follow(Walk& w, int rank, std::string how) const {
  const SnapshotPendingOp* h = head(rank);
  if (h == nullptr) return stopped(fmt::format("rank {} runs nothing", rank));
  if (!w.followed.insert({rank, h->comm, h->op, h->seq.value_or(0)}).second)
    return stopped(fmt::format("the waits lead back to rank {}'s {}: they wait on each other", rank, opAt(*h)));
  if (h->comm.empty() || seq_.sharedByProcess(h->comm))
    return stopped(fmt::format("rank {}'s GPU runs {}", rank, h->op));
  const int peer = h->peer ? seq_.globalRank(h->comm, *h->peer) : -1;
  if (!how.empty())
    w.origin.moved.push_back(fmt::format("{}: its GPU runs {}, for {:.1f} s", how, described(*h, peer), h->age_s));
  // A transfer names its peer, a collective its sequence number; one that does not is no hop.
  if (h->op_class == "p2p") return h->peer ? throughTransfer(w, rank, *h) : stopped("a transfer without its peer");
  return h->seq ? throughCollective(w, rank, *h)
                : stopped(fmt::format("rank {}'s {} has no sequence number", rank, h->op));
}

ChainEnd WaitChain::throughCollective(Walk& w, int rank, const SnapshotPendingOp& op) const {
  const HangFocus here{op.comm, *op.seq, op.op, w.origin.source, w.origin.moved};
  // Members that never issued it and run nothing first: they are where the waits end.
  for (int m : members(op.comm)) {
    const RankSummary* s = job_.find(m);
    const SnapshotComm* c = s ? entryOf(*s, op.comm) : nullptr;
    if (m == rank || c == nullptr || head(m) != nullptr || inNcclCall(*s)) continue;
    if (!c->last_issued_seq || *c->last_issued_seq < *op.seq) return ended(ChainEnd::Kind::kHostCode, here, m);
  }
  for (int m : members(op.comm)) {
    const RankSummary* s = job_.find(m);
    const SnapshotPendingOp* h = head(m);
    if (m == rank || s == nullptr || h == nullptr || (h->comm == op.comm && h->seq == op.seq)) continue;
    const SnapshotComm* c = entryOf(*s, op.comm);
    const bool queued = pendingAt(*s, op.comm, *op.seq);
    const bool never = c != nullptr && (!c->last_issued_seq || *c->last_issued_seq < *op.seq);
    if (queued || never)
      return follow(
          w, m,
          fmt::format("rank {}, a member, {}", m, queued ? "has it queued behind other work" : "never called it"));
  }
  return ended(ChainEnd::Kind::kCollective, here);
}

// A transfer's peer of which no file says anything: where the waits end (kPeerLeftNothing).
ChainEnd WaitChain::peerLeftNothing(const HangFocus& at, const SnapshotPendingOp& op, int waiter) const {
  ChainEnd e = ended(ChainEnd::Kind::kPeerLeftNothing, at, -1, waiter);
  e.peer_in_comm = *op.peer;
  if (seq_.knowsGlobalRank(op.comm, *op.peer)) e.rank = seq_.globalRank(op.comm, *op.peer);
  return e;
}

ChainEnd WaitChain::throughTransfer(Walk& w, int rank, const SnapshotPendingOp& op) const {
  const int peer = seq_.globalRank(op.comm, *op.peer);
  const RankSummary* mine = job_.find(rank);
  const SnapshotComm* my_entry = mine ? entryOf(*mine, op.comm) : nullptr;
  const RankSummary* theirs = job_.find(peer);
  const HangFocus here{op.comm, 0, op.op, w.origin.source, w.origin.moved};
  if (my_entry == nullptr) return stopped(fmt::format("rank {} has no entry for communicator {}", rank, op.comm));
  // Nothing of the peer's: where it stands is unknown, and it is what this transfer waits on.
  if (!seq_.knowsGlobalRank(op.comm, *op.peer) || theirs == nullptr || !theirs->answered())
    return peerLeftNothing(here, op, rank);
  const SnapshotPendingOp* h = head(peer);
  if (h == nullptr && inNcclCall(*theirs)) return stopped(fmt::format("rank {} is inside an NCCL call", peer));
  if (h == nullptr) {
    // A group is one kernel: a transfer whose half its peer did (issued and completed: the
    // counts say so) only waits for another transfer of its group.
    if (peerDidItsHalf(rank, peer, op, 0)) return throughRestOfGroup(w, rank, op);
    return ended(ChainEnd::Kind::kHostCode, here, peer, rank);
  }
  const bool matched = std::any_of(theirs->pending.begin(), theirs->pending.end(), [&](const SnapshotPendingOp& o) {
    return o.comm == op.comm && o.op_class == "p2p" && o.peer == my_entry->rank && isSend(o) != isSend(op);
  });
  // A group is one kernel: the peer is in the transfer when it runs a group on this communicator
  // that holds the matching half, and with this rank (a transfer it runs with another peer is
  // what it waits on first).
  if (matched && h->comm == op.comm && h->op_class == "p2p" && h->peer == my_entry->rank) {
    ChainEnd e = ended(ChainEnd::Kind::kP2pLink, here);
    e.from = isSend(op) ? rank : peer;
    e.to = isSend(op) ? peer : rank;
    return e;
  }
  return follow(w, peer,
                fmt::format("rank {} is not in the {} rank {} that this needs", peer,
                            isSend(op) ? "receive from" : "send to", rank));
}

// Whether `peer` issued the half of `op` (a pending transfer of `rank`'s, the `nth` of its kind
// with that peer in its group) and has it done: its count of that half, less what it has
// pending, reaches the number `op` has between the two (this rank's completed ones + 1 + nth).
// Counts from comms[].p2p; no counts: false.
const PipelineLayout& WaitChain::layout() const {
  if (!layout_) layout_.emplace(job_);
  return *layout_;
}

bool WaitChain::peerDidItsHalf(int rank, int peer, const SnapshotPendingOp& op, uint64_t nth) const {
  const bool send = isSend(op);
  const PipelineLayout& counts = layout();
  const std::optional<uint64_t> mine = send ? counts.sends(op.comm, rank, peer) : counts.receives(op.comm, rank, peer);
  const std::optional<uint64_t> theirs = send ? counts.receives(op.comm, peer, rank) : counts.sends(op.comm, peer, rank);
  const RankSummary* me = job_.find(rank);
  const RankSummary* them = job_.find(peer);
  if (!mine || !theirs || me == nullptr || them == nullptr) return false;
  auto pendingWith = [&](const RankSummary& s, int other, bool sending) {
    return static_cast<uint64_t>(std::count_if(s.pending.begin(), s.pending.end(), [&](const SnapshotPendingOp& o) {
      return o.comm == op.comm && o.op_class == "p2p" && o.peer && seq_.globalRank(op.comm, *o.peer) == other &&
             isSend(o) == sending;
    }));
  };
  const uint64_t mine_pending = pendingWith(*me, peer, send);
  const uint64_t theirs_pending = pendingWith(*them, rank, !send);
  if (*mine < mine_pending || *theirs < theirs_pending || *mine == 0) return false;
  return *theirs - theirs_pending >= *mine - mine_pending + 1 + nth;
}

// The transfers queued right behind `first` on `rank`'s stream (its group: one kernel) whose
// half their peer has not done: the first one is what the group waits for. None: every half
// was done by its peer (data lost in transit; the verdict's rules for that decide).
ChainEnd WaitChain::throughRestOfGroup(Walk& w, int rank, const SnapshotPendingOp& first) const {
  const RankSummary* s = job_.find(rank);
  const size_t at = static_cast<size_t>(&first - s->pending.data());
  std::map<std::pair<int, bool>, uint64_t> nth;  // (peer, send) -> its kind's ops so far in the group
  for (size_t i = at; i < s->pending.size(); ++i) {
    const SnapshotPendingOp& op = s->pending[i];
    if (op.op_class != "p2p" || op.comm != first.comm || !op.peer) break;
    const int peer = seq_.globalRank(op.comm, *op.peer);
    const uint64_t n = nth[{peer, isSend(op)}]++;
    if (i == at || peerDidItsHalf(rank, peer, op, n)) continue;
    const RankSummary* theirs = job_.find(peer);
    const HangFocus here{op.comm, 0, op.op, w.origin.source, w.origin.moved};
    if (!seq_.knowsGlobalRank(op.comm, *op.peer) || theirs == nullptr || !theirs->answered())
      return peerLeftNothing(here, op, rank);
    if (head(peer) == nullptr && !inNcclCall(*theirs))
      return ended(ChainEnd::Kind::kHostCode, here, peer, rank);
    return follow(w, peer,
                  fmt::format("rank {}'s group waits for its {} rank {}, which rank {} has not done", rank,
                              isSend(op) ? "send to" : "receive from", peer, peer));
  }
  return stopped(fmt::format("every transfer of rank {}'s group on communicator {} had its half done by its peer",
                             rank, first.comm));
}

}  // namespace hangwatch::verdict
