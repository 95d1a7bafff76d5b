#include "hangwatch/verdict/pipeline_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "wording_text.h"

namespace hangwatch::verdict {
namespace {

// A communicator it talked to its neighbours on, one comm rank away, and nobody else.
bool neighboursOnly(const SnapshotComm& c) {
  if (c.size < 2 || c.rank < 0 || c.p2p.empty()) return false;
  return std::all_of(c.p2p.begin(), c.p2p.end(),
                     [&](const SnapshotP2pPeer& p) { return std::abs(p.peer - c.rank) == 1; });
}

// A transfer between its first and last rank (more than two): a ring exchange, not a pipeline,
// whose middle ranks look like stages from their own counts alone.
bool wrapsAround(const SnapshotComm& c) {
  return c.size > 2 && std::any_of(c.p2p.begin(), c.p2p.end(),
                                   [&](const SnapshotP2pPeer& p) { return std::abs(p.peer - c.rank) == c.size - 1; });
}

}  // namespace

// Every communicator's members and every pipeline position's ranks, once: a report asks for
// several ranks' places, and each answer would otherwise read every rank's communicators.
PipelineLayout::PipelineLayout(const JobData& job) : job_(job) {
  for (const RankSummary& r : job_.ranks)
    for (const SnapshotComm& c : r.comms)
      if (wrapsAround(c)) rings_.insert(c.hash);
  for (const RankSummary& r : job_.ranks) {
    for (const SnapshotComm& c : r.comms) {
      if (c.rank < 0 || c.state == "destroyed") continue;
      members_[c.hash][c.rank] = r.rank;
      if (pipelineLike(c)) positions_[{c.size, c.rank}].insert(r.rank);
    }
  }
}

bool PipelineLayout::pipelineLike(const SnapshotComm& c) const {
  return neighboursOnly(c) && !rings_.count(c.hash);
}

const SnapshotComm* PipelineLayout::entry(int rank, const std::string& comm) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return nullptr;
  for (const SnapshotComm& c : s->comms)
    if (c.hash == comm && c.rank >= 0) return &c;
  return nullptr;
}

int PipelineLayout::commRankOf(const std::string& comm, int global) const {
  const SnapshotComm* c = entry(global, comm);
  return c ? c->rank : -1;
}

std::optional<PipelinePlace> PipelineLayout::of(int rank) const {
  const RankSummary* s = job_.find(rank);
  if (s == nullptr) return std::nullopt;
  const SnapshotComm* pipe = nullptr;
  for (const SnapshotComm& c : s->comms) {
    if (!pipelineLike(c)) continue;
    if (pipe != nullptr && pipe->hash != c.hash) return std::nullopt;  // several: interleaved, or not a pipeline
    pipe = &c;
  }
  if (pipe == nullptr) return std::nullopt;
  PipelinePlace place;
  place.stage = pipe->rank;
  place.stages = pipe->size;
  // This stage's ranks: those whose own pipeline communicator, of the same size, has them at the
  // same position.
  const std::set<int>& at = positions_.at({pipe->size, pipe->rank});
  place.stage_ranks.assign(at.begin(), at.end());
  const auto groupOf = [&](const SnapshotComm& c) {
    RankGroup g{c.hash, {}};
    for (const auto& [comm_rank, global] : members_.at(c.hash)) g.ranks.push_back(global);
    return g;
  };
  place.pipeline = groupOf(*pipe);
  for (const SnapshotComm& c : s->comms) {
    if (c.hash == pipe->hash || c.size < 2 || c.rank < 0 || c.state == "destroyed" || c.size == job_.world_size)
      continue;
    place.groups.push_back(groupOf(c));
  }
  std::sort(place.groups.begin(), place.groups.end(),
            [](const RankGroup& a, const RankGroup& b) { return a.ranks.size() < b.ranks.size(); });
  return place;
}

std::optional<uint64_t> PipelineLayout::counted(const std::string& comm, int at, int peer_global,
                                                uint64_t SnapshotP2pPeer::*field) const {
  const SnapshotComm* c = entry(at, comm);
  const int peer = commRankOf(comm, peer_global);
  if (c == nullptr || peer < 0) return std::nullopt;
  for (const SnapshotP2pPeer& p : c->p2p)
    if (p.peer == peer) return p.*field;
  // Not among the kept peers: none issued, unless it may be one of the untracked.
  if (c->p2p_untracked > 0 || c->p2p.size() >= SnapshotComm::kP2pPeersKept) return std::nullopt;
  return 0;
}

std::optional<uint64_t> PipelineLayout::sends(const std::string& comm, int from, int to) const {
  return counted(comm, from, to, &SnapshotP2pPeer::sends);
}

std::optional<uint64_t> PipelineLayout::receives(const std::string& comm, int at, int from) const {
  return counted(comm, at, from, &SnapshotP2pPeer::receives);
}

std::optional<uint64_t> PipelineLayout::usualCount() const {
  std::map<uint64_t, int> seen;
  for (const RankSummary& r : job_.ranks)
    for (const SnapshotComm& c : r.comms)
      for (const SnapshotP2pPeer& p : c.p2p) {
        ++seen[p.sends];
        ++seen[p.receives];
      }
  if (seen.empty()) return std::nullopt;
  const auto top =
      std::max_element(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  // A tie is no majority: half the job runs one schedule, half another.
  if (std::count_if(seen.begin(), seen.end(), [&](const auto& c) { return c.second == top->second; }) > 1)
    return std::nullopt;
  return top->first;
}

}  // namespace hangwatch::verdict
