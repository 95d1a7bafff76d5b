#include "hangwatch/verdict/sequence_analysis.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace hangwatch::verdict {
namespace {

// The oldest pending collective of a rank on `comm` (lowest sequence number).
const SnapshotPendingOp* oldestOn(const RankSummary& s, const std::string& comm) {
  const SnapshotPendingOp* best = nullptr;
  for (const SnapshotPendingOp& op : s.pending) {
    if (op.comm != comm || !op.seq || op.op_class == "p2p") continue;
    if (!best || *op.seq < *best->seq) best = &op;
  }
  return best;
}

// A host thread still inside the NCCL call of the focus collective: the watchdog counts a
// collective as issued only when its call returns, so such a rank is in it, not behind.
bool blockedInCall(const RankSummary& s, const HangFocus& focus) {
  return std::any_of(s.host_calls.begin(), s.host_calls.end(), [&](const SnapshotHostCall& h) {
    return h.comm == focus.comm && h.seq && *h.seq == focus.seq;
  });
}

}  // namespace

SequenceAnalysis::SequenceAnalysis(const JobData& job) : job_(job) {
  for (const RankSummary& s : job.ranks) {
    std::map<std::string, int> held;
    for (const SnapshotComm& c : s.comms) {
      if (c.rank >= 0) members_[c.hash][c.rank] = s.rank;
      sizes_[c.hash] = std::max(sizes_[c.hash], c.size);
      if (c.rank >= 0 && c.state != "destroyed" && ++held[c.hash] > 1) shared_.insert(c.hash);
    }
  }
  // A communicator split off the world has ranks of its own; no snapshot names the global rank
  // of a member that left none. Every snapshot lists every communicator its process holds, so
  // when the job has one rank without a snapshot and a communicator one member nobody names,
  // that rank is the member. A GPU job's files say the same; with more of either, none is placed.
  for (int r = 0; r < job.world_size; ++r)
    if (const RankSummary* s = job.find(r); s == nullptr || !s->has_snapshot) without_snapshot_.push_back(r);
  if (!job.world_size_known || !job.gpu_ranks.empty() || without_snapshot_.size() != 1) return;
  for (const auto& [comm, size] : sizes_) {
    const std::map<int, int>& known = members_[comm];
    if (shared_.count(comm) || static_cast<int>(known.size()) != size - 1) continue;
    for (int cr = 0; cr < size; ++cr)
      if (!known.count(cr)) inferred_[comm][cr] = without_snapshot_.front();
  }
}

const SnapshotComm* SequenceAnalysis::commEntry(const std::string& comm, int comm_rank, const RankSummary** owner) const {
  auto m = members_.find(comm);
  if (m == members_.end()) return nullptr;
  auto r = m->second.find(comm_rank);
  if (r == m->second.end()) return nullptr;
  const RankSummary* s = job_.find(r->second);
  if (s == nullptr) return nullptr;
  if (owner) *owner = s;
  for (const SnapshotComm& c : s->comms)
    if (c.hash == comm && c.rank == comm_rank) return &c;
  return nullptr;
}

int SequenceAnalysis::globalRank(const std::string& comm, int comm_rank) const {
  if (shared_.count(comm)) return comm_rank;
  auto c = members_.find(comm);
  if (c != members_.end()) {
    auto r = c->second.find(comm_rank);
    if (r != c->second.end()) return r->second;
  }
  if (auto i = inferred_.find(comm); i != inferred_.end() && i->second.count(comm_rank)) return i->second.at(comm_rank);
  return comm_rank;
}

bool SequenceAnalysis::knowsGlobalRank(const std::string& comm, int comm_rank) const {
  // On a world-sized communicator comm rank and global rank agree (as positions() takes them).
  if (shared_.count(comm) || commSize(comm) == job_.world_size) return true;
  const auto named = [&](const std::map<std::string, std::map<int, int>>& by_comm) {
    auto c = by_comm.find(comm);
    return c != by_comm.end() && c->second.count(comm_rank) > 0;
  };
  return named(members_) || named(inferred_);
}

std::optional<HangFocus> SequenceAnalysis::focus() const {
  if (job_.trigger && job_.trigger->stuck_op && job_.trigger->stuck_op->seq && !job_.trigger->stuck_op->comm.empty() &&
      members_.count(job_.trigger->stuck_op->comm)) {
    const StuckOp& s = *job_.trigger->stuck_op;
    HangFocus f{s.comm, *s.seq, s.op, "TRIGGER.json", {}};
    // The first rank to time out may be one that ran ahead: it finished the collective its
    // peers still wait in (its sends fit in their buffers) and waits in the next one. The hang
    // is where the members that are furthest behind on this communicator are overdue.
    for (const RankSummary& r : job_.ranks) {
      const SnapshotPendingOp* op = oldestOn(r, f.comm);
      if (op && *op->seq < f.seq && r.timeout_s > 0 && op->age_s >= r.timeout_s) {
        f.seq = *op->seq;
        f.op = op->op;
      }
    }
    return f;
  }
  // Else the (comm, seq) most ranks wait in; ties go to the larger communicator.
  std::map<std::pair<std::string, uint64_t>, std::pair<int, std::string>> votes;
  for (const RankSummary& s : job_.ranks) {
    std::map<std::string, const SnapshotPendingOp*> per_comm;
    for (const SnapshotPendingOp& op : s.pending) {
      if (op.comm.empty() || !op.seq || op.op_class == "p2p") continue;
      const SnapshotPendingOp*& best = per_comm[op.comm];
      if (!best || *op.seq < *best->seq) best = &op;
    }
    for (const auto& [comm, op] : per_comm) {
      auto& v = votes[{comm, *op->seq}];
      ++v.first;
      if (v.second.empty()) v.second = op->op;
    }
  }
  std::optional<HangFocus> best;
  std::tuple<int, int> best_key{-1, -1};
  for (const auto& [key, v] : votes) {
    auto size = sizes_.find(key.first);
    std::tuple<int, int> k{v.first, size == sizes_.end() ? 0 : size->second};
    if (k > best_key) {
      best_key = k;
      best = HangFocus{key.first, key.second, v.second, "pending operations", {}};
    }
  }
  return best;
}

CommPositions SequenceAnalysis::positions(const HangFocus& focus) const {
  CommPositions p;
  auto size = sizes_.find(focus.comm);
  p.comm_size = size == sizes_.end() ? 0 : size->second;
  std::map<std::tuple<std::string, uint64_t, std::string>, std::vector<int>> shapes;
  for (const RankSummary& s : job_.ranks) {
    auto c = std::find_if(s.comms.begin(), s.comms.end(), [&](const SnapshotComm& x) { return x.hash == focus.comm; });
    if (c == s.comms.end()) continue;
    p.last_issued[s.rank] = c->last_issued_seq;
    p.last_completed[s.rank] = c->last_completed_seq;
    const SnapshotPendingOp* op = oldestOn(s, focus.comm);
    if (op && *op->seq == focus.seq) {
      shapes[{op->op, op->count, op->dtype}].push_back(s.rank);
    } else if (blockedInCall(s, focus)) {
      p.in_host_call.push_back(s.rank);
    } else if (!c->last_issued_seq || *c->last_issued_seq < focus.seq) {
      p.behind.push_back(s.rank);
    } else {
      p.finished.push_back(s.rank);
    }
  }
  for (auto& [shape, ranks] : shapes) p.groups.push_back({std::get<0>(shape), std::get<1>(shape), std::get<2>(shape), ranks, std::nullopt});
  std::stable_sort(p.groups.begin(), p.groups.end(),
                   [](const OpGroup& a, const OpGroup& b) { return a.ranks.size() > b.ranks.size(); });
  auto m = members_.find(focus.comm);
  for (int cr = 0; cr < p.comm_size; ++cr) {
    if (m != members_.end() && m->second.count(cr)) continue;
    // No snapshot names this member: its global rank where it was placed by elimination; else, as
    // on a world-sized communicator, where comm rank and global rank agree, its comm rank.
    p.members_missing.push_back(globalRank(focus.comm, cr));
  }
  return p;
}

std::optional<HangFocus> SequenceAnalysis::heldElsewhere(const HangFocus& focus, const std::vector<int>& behind) const {
  std::optional<HangFocus> best;
  double best_age = -1;
  for (int r : behind) {
    const RankSummary* s = job_.find(r);
    if (s == nullptr || s->timeout_s <= 0) continue;
    for (const SnapshotPendingOp& op : s->pending) {
      if (op.comm.empty() || op.comm == focus.comm || !op.seq || op.op_class == "p2p" || !members_.count(op.comm))
        continue;
      if (op.age_s < s->timeout_s || op.age_s <= best_age || oldestOn(*s, op.comm) != &op) continue;
      best_age = op.age_s;
      best = HangFocus{op.comm, *op.seq, op.op, focus.source, focus.moved};
      best->moved.push_back(fmt::format(
          "rank {} never called {} seq {} on communicator {}: its GPU has been in {} seq {} on communicator {} for "
          "{:.1f} s, past its timeout ({:.0f} s), and its stream runs in order; the hang is there",
          r, focus.op, focus.seq, focus.comm, op.op, *op.seq, op.comm, op.age_s, s->timeout_s));
    }
  }
  return best;
}

std::optional<Divergence> SequenceAnalysis::firstDivergence(const std::string& comm, uint64_t up_to) const {
  struct Call {
    std::string op, dtype;
    uint64_t count = 0;
    std::optional<int> root;
  };
  // ncclBcast is ncclBroadcast in place: the same collective to its peers.
  auto named = [](const std::string& op) { return op == "ncclBcast" ? std::string("ncclBroadcast") : op; };
  // member -> seq -> what it called there.
  std::map<int, std::map<uint64_t, Call>> calls;
  const bool shared = shared_.count(comm) > 0;
  for (const RankSummary& s : job_.ranks) {
    for (const SnapshotComm& c : s.comms) {
      if (c.hash != comm || c.rank < 0) continue;
      const int member = shared ? c.rank : s.rank;
      std::map<uint64_t, Call>& mine = calls[member];
      for (const SnapshotIssuedOp& op : c.recent)
        if (op.seq <= up_to) mine[op.seq] = {named(op.op), op.dtype, op.count, op.root};
      // Pending collectives older than the record's window: a process driving several ranks of
      // the communicator does not say which rank's stream holds which, so only on one of its own.
      if (shared) continue;
      for (const SnapshotPendingOp& op : s.pending) {
        if (op.comm != comm || !op.seq || *op.seq > up_to || op.op_class != "collective" || mine.count(*op.seq))
          continue;
        mine[*op.seq] = {named(op.op), op.dtype, op.count, std::nullopt};
      }
    }
  }
  std::set<uint64_t> seqs;
  for (const auto& [member, mine] : calls)
    for (const auto& [seq, call] : mine) seqs.insert(seq);
  for (uint64_t seq : seqs) {
    std::vector<std::pair<int, const Call*>> at;
    for (const auto& [member, mine] : calls)
      if (auto c = mine.find(seq); c != mine.end()) at.emplace_back(member, &c->second);
    if (at.size() < 2) continue;
    // Roots count only where every member's is known (a graph replay keeps none).
    const bool roots = std::all_of(at.begin(), at.end(), [](const auto& m) { return m.second->root.has_value(); });
    std::map<std::tuple<std::string, uint64_t, std::string, int>, std::vector<int>> shapes;
    for (const auto& [member, call] : at)
      shapes[{call->op, call->count, call->dtype, roots ? *call->root : -1}].push_back(member);
    if (shapes.size() < 2) continue;
    Divergence d;
    d.seq = seq;
    for (auto& [shape, ranks] : shapes) {
      OpGroup g{std::get<0>(shape), std::get<1>(shape), std::get<2>(shape), ranks, std::nullopt};
      if (roots) g.root = std::get<3>(shape);
      d.groups.push_back(std::move(g));
    }
    std::stable_sort(d.groups.begin(), d.groups.end(),
                     [](const OpGroup& a, const OpGroup& b) { return a.ranks.size() > b.ranks.size(); });
    for (const auto& [member, mine] : calls)
      if (!mine.count(seq)) d.unknown.push_back(member);
    return d;
  }
  return std::nullopt;
}

std::vector<int> SequenceAnalysis::ranksWithPendingWork() const {
  std::vector<int> out;
  for (const RankSummary& s : job_.ranks) {
    if (!s.pending.empty() || !s.host_calls.empty()) out.push_back(s.rank);
  }
  return out;
}

}  // namespace hangwatch::verdict
