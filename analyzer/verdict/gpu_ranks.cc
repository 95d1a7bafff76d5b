#include "hangwatch/verdict/gpu_ranks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

namespace hangwatch::verdict {
namespace {

// The job's widest communicator: the largest size any process holds a rank of; of equal
// sizes, the one most ranks hold (destroyed communicators are not counted).
struct Widest {
  std::string hash;
  int size = 0;
};

Widest widestCommunicator(const JobData& job) {
  std::map<std::string, std::pair<int, int>> seen;  // hash -> size, ranks held
  for (const RankSummary& s : job.ranks)
    for (const SnapshotComm& c : s.comms) {
      if (c.rank < 0 || c.size < 2 || c.hash.empty() || c.state == "destroyed") continue;
      auto& [size, held] = seen[c.hash];
      size = std::max(size, c.size);
      ++held;
    }
  Widest w;
  int held_best = 0;
  for (const auto& [hash, sh] : seen) {
    if (sh.first > w.size || (sh.first == w.size && sh.second > held_best)) {
      w = {hash, sh.first};
      held_best = sh.second;
    }
  }
  return w;
}

// Each answered process's entries of the widest communicator, or nothing when the split does
// not apply: no process holds two of its ranks, one holds none, or two claim one rank.
std::vector<std::vector<const SnapshotComm*>> entriesOf(const JobData& job, const Widest& w) {
  std::vector<std::vector<const SnapshotComm*>> out(job.ranks.size());
  std::set<int> claimed;
  bool several = false;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    for (const SnapshotComm& c : job.ranks[i].comms) {
      if (c.hash != w.hash || c.rank < 0 || c.rank >= w.size) continue;
      if (!claimed.insert(c.rank).second) return {};
      out[i].push_back(&c);
    }
    if (out[i].empty()) return {};
    several = several || out[i].size() > 1;
  }
  if (!several) return {};
  for (auto& e : out) std::sort(e.begin(), e.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  return out;
}

// Which of a process's GPU records a (communicator, rank in it) belongs to: the one whose
// communicator entries hold it; -1 when none does.
int holderOf(const std::vector<RankSummary>& parts, const std::string& hash, uint64_t nccl_id, int comm_rank) {
  for (size_t i = 0; i < parts.size(); ++i)
    for (const SnapshotComm& c : parts[i].comms)
      if (c.rank == comm_rank && ((!hash.empty() && c.hash == hash) || (nccl_id && ncclIdValue(c.nccl_id) == nccl_id)))
        return static_cast<int>(i);
  return -1;
}

// The GPU records (of one process) that are members of NCCL's communicator `id`.
std::vector<size_t> membersOf(const std::vector<RankSummary>& parts, uint64_t id) {
  std::vector<size_t> out;
  for (size_t i = 0; i < parts.size(); ++i)
    if (std::any_of(parts[i].comms.begin(), parts[i].comms.end(),
                    [&](const SnapshotComm& c) { return ncclIdValue(c.nccl_id) == id; }))
      out.push_back(i);
  return out;
}

// One GPU's record of a process: its own communicator entries, ops, host calls, progress;
// the process-wide parts (threads, state, identity) as they are.
RankSummary gpuPart(const RankSummary& p, const SnapshotComm& entry, int world, bool first) {
  RankSummary g;
  static_cast<RankRecord&>(g) = static_cast<const RankRecord&>(p);
  g.collecting = p.collecting;
  g.launcher_rank = p.rank;
  g.rank = entry.rank;
  g.world_size = world;
  if (entry.device >= 0) g.device = entry.device;
  const int dev = entry.device;
  auto mine = [&](std::optional<int> d) { return d ? *d == dev : first; };
  g.comms.clear();
  for (const SnapshotComm& c : p.comms)
    if (c.device >= 0 ? c.device == dev : first) g.comms.push_back(c);
  g.pending.clear();
  for (const SnapshotPendingOp& op : p.pending)
    if (mine(op.device)) g.pending.push_back(op);
  g.host_calls.clear();
  for (const SnapshotHostCall& h : p.host_calls) {
    const bool member =
        std::any_of(g.comms.begin(), g.comms.end(), [&](const SnapshotComm& c) { return c.hash == h.comm; });
    if (member || (h.comm.empty() && first)) g.host_calls.push_back(h);
  }
  if (!first) g.unique_ids_made.clear();
  g.ring_progress.clear();
  g.proxy_ends.clear();
  g.kernel_channels.clear();
  g.algorithms.clear();
  return g;
}

// The per-communicator-rank records go to the GPU that holds that rank; the profiler's kernel
// channels and algorithm counts are kept per communicator by NCCL's profiler, not per rank:
// the algorithms go to every member GPU of the process, the kernel channels only where one GPU
// of the process is a member (the counts of several would be summed: not guessed apart).
void handOut(const RankSummary& p, std::vector<RankSummary>& parts) {
  for (const RingProgress& rp : p.ring_progress) {
    const int cr = rp.comm_rank ? *rp.comm_rank : rp.rank;
    const int i = holderOf(parts, rp.comm, ncclIdValue(rp.nccl_comm), cr);
    if (i >= 0) parts[i].ring_progress.push_back(rp);
  }
  for (const ProxyEnd& e : p.proxy_ends) {
    const int i = holderOf(parts, "", e.nccl_comm, e.comm_rank);
    if (i >= 0) parts[i].proxy_ends.push_back(e);
  }
  for (const CollAlgorithmUse& a : p.algorithms)
    for (size_t i : membersOf(parts, a.nccl_comm)) parts[i].algorithms.push_back(a);
  for (const KernelChannelState& k : p.kernel_channels) {
    std::vector<size_t> members = membersOf(parts, k.nccl_comm);
    if (members.size() == 1) parts[members[0]].kernel_channels.push_back(k);
  }
}

std::vector<int> gpuRanksOfProcess(const std::map<int, std::vector<int>>& by_process, int process) {
  auto it = by_process.find(process);
  return it == by_process.end() ? std::vector<int>{} : it->second;
}

// Ranks the loader recorded by process (collecting, gone or frozen) in GPU ranks.
void mapProcessLists(JobData& job, const std::map<int, std::vector<int>>& by_process) {
  std::vector<int> collecting;
  for (int p : job.ranks_collecting)
    for (int g : gpuRanksOfProcess(by_process, p)) collecting.push_back(g);
  job.ranks_collecting = std::move(collecting);
  if (job.trigger && job.trigger->rank) {
    std::vector<int> gs = gpuRanksOfProcess(by_process, *job.trigger->rank);
    if (!gs.empty()) {
      job.trigger_process = job.trigger->rank;
      job.trigger->rank = gs.front();
    }
  }
  // A process that left no dump holds GPU ranks nobody can name (its communicator entries are
  // in the snapshot it did not write): said as a problem, in the launcher's rank.
  for (const ExitedRank& e : job.ranks_exited)
    job.problems.push_back(
        fmt::format("process of launcher rank {} (pid {} on {}) left no dump: the GPU ranks it "
                    "drove are among those missing",
                    e.rank, e.pid, e.host));
  job.ranks_exited.clear();
}

}  // namespace

void splitProcessesIntoGpuRanks(JobData& job) {
  const Widest w = widestCommunicator(job);
  if (w.size == 0) return;
  const std::vector<std::vector<const SnapshotComm*>> entries = entriesOf(job, w);
  if (entries.empty()) return;
  std::vector<RankSummary> split;
  std::map<int, std::vector<int>> by_process;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankSummary& p = job.ranks[i];
    std::vector<RankSummary> parts;
    for (size_t k = 0; k < entries[i].size(); ++k) parts.push_back(gpuPart(p, *entries[i][k], w.size, k == 0));
    handOut(p, parts);
    for (RankSummary& g : parts) {
      by_process[p.rank].push_back(g.rank);
      job.gpu_ranks.push_back({g.rank, p.rank, p.pid, p.host, g.device.value_or(-1)});
      split.push_back(std::move(g));
    }
  }
  std::sort(split.begin(), split.end(), [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  std::sort(job.gpu_ranks.begin(), job.gpu_ranks.end(),
            [](const GpuRank& a, const GpuRank& b) { return a.rank < b.rank; });
  job.processes = static_cast<int>(job.ranks.size());
  job.gpu_ranks_comm = w.hash;
  job.ranks = std::move(split);
  mapProcessLists(job, by_process);
}

std::string gpuRanksText(const JobData& job) {
  std::map<int, std::vector<int>> by_process;
  for (const GpuRank& g : job.gpu_ranks) by_process[g.process].push_back(g.rank);
  std::vector<std::string> parts;
  for (const auto& [process, ranks] : by_process)
    parts.push_back(fmt::format("process {} drives rank(s) {}", process, fmt::join(ranks, ",")));
  return fmt::format("ranks are GPU ranks (each GPU's rank in communicator {}) of {} process(es): {}",
                     job.gpu_ranks_comm, job.processes, fmt::join(parts, "; "));
}

}  // namespace hangwatch::verdict
