// slow-link (named from the wire time): a network link whose data sits on the wire far
// longer than its communicator's other links is the ring's bottleneck.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

struct Wire {
  int from;
  int to;
  int comm_size;
  double share;  // of the sender's measured time with data on the wire
  uint64_t bytes;
  int64_t busy_ns;
};

struct Wires {
  // Each member names itself in its own link records: comm rank -> global rank.
  std::map<std::string, std::map<int, int>> global_of;
  std::map<std::string, std::vector<Wire>> by_comm;
};

Wires collectWires(const JobProfile& job) {
  Wires w;
  for (const auto& [rank, p] : job.ranks())
    for (const auto& [key, l] : p.links) w.global_of[l.nccl_comm][l.comm_rank] = rank;
  for (const auto& [rank, p] : job.ranks()) {
    if (p.window_ns <= 0) continue;
    for (const auto& [key, l] : p.links) {
      const std::map<int, int>& members = w.global_of[l.nccl_comm];
      auto to = members.find(l.peer);
      if (to == members.end()) continue;  // the receiver sent nothing on this communicator
      w.by_comm[l.nccl_comm].push_back({rank, to->second, l.comm_size,
                                        static_cast<double>(l.busy_ns) / static_cast<double>(p.window_ns), l.bytes,
                                        l.busy_ns});
    }
  }
  return w;
}

std::string hostOf(const JobProfile& job, int rank) {
  auto it = job.ranks().find(rank);
  return it == job.ranks().end() || it->second.host.empty() ? std::string() : " (" + it->second.host + ")";
}

// The watchdog's hash of the same communicator: the one with the same members.
std::string watchdogHash(const JobProfile& job, const std::map<int, int>& global_of, int size) {
  std::vector<int> members;
  for (const auto& [cr, g] : global_of) members.push_back(g);
  std::sort(members.begin(), members.end());
  std::string found;
  for (const auto& [hash, c] : job.communicators()) {
    if (c.size != size || c.members() != members) continue;
    if (!found.empty()) return std::string();  // two alike: do not guess
    found = hash;
  }
  return found;
}

void nameLink(const JobProfile& job, const Wire& w, double ref, const std::string& hash, const std::string& line,
              SlowdownFinding& f) {
  f.kind = "slow-link";
  f.ranks = {w.from, w.to};
  f.link = RingLink{w.from, w.to};
  f.communicator = hash;
  f.metric = "link_wire_pct";
  f.value = 100 * w.share;
  f.group_median = 100 * ref;
  f.owner = "operations";
  f.evidence.push_back(line + ": the ring waits on it (NCCL proxy steps, SendWait until done)");
  f.evidence.push_back(fmt::format(
      "it moved {:.1f} MB at {:.3g} GB/s while busy; the senders upstream of it wait for credits instead",
      static_cast<double>(w.bytes) / 1e6,
      w.busy_ns > 0 ? static_cast<double>(w.bytes) / static_cast<double>(w.busy_ns) : 0.0));
  f.evidence.push_back(fmt::format("check the NIC, cable and switch ports between rank {}{} and rank {}{}", w.from,
                                   hostOf(job, w.from), w.to, hostOf(job, w.to)));
}

}  // namespace

void detectBottleneckLinks(const DetectorInput& in, SlowdownAnalysis& out) {
  Wires all = collectWires(in.job);
  std::map<std::pair<int, int>, SlowdownFinding> named;
  for (const auto& [nccl_comm, wires] : all.by_comm) {
    if (wires.size() < 2) continue;
    for (size_t i = 0; i < wires.size(); ++i) {
      std::vector<double> others;
      for (size_t j = 0; j < wires.size(); ++j)
        if (j != i) others.push_back(wires[j].share);
      const double ref = median(others);
      const Wire& w = wires[i];
      if (w.share < in.t.link_wire_ratio * ref || w.share - ref < in.t.link_wire_points) continue;
      const std::string hash = watchdogHash(in.job, all.global_of[nccl_comm], w.comm_size);
      const std::string comm_name =
          fmt::format("communicator {} ({} ranks)", hash.empty() ? "(NCCL id " + nccl_comm + ")" : hash, w.comm_size);
      const std::string line =
          fmt::format("link {}->{} has data on the wire {:.1f}% of the time, the other {} link(s) of {} {:.1f}% (median)",
                      w.from, w.to, 100 * w.share, others.size(), comm_name, 100 * ref);
      auto [it, fresh] = named.try_emplace({w.from, w.to});
      if (fresh)
        nameLink(in.job, w, ref, hash, line, it->second);
      else
        it->second.evidence.push_back("it is the bottleneck of " + comm_name + " too: " + line);
    }
  }
  for (auto& [link, f] : named) out.findings.push_back(std::move(f));
}

}  // namespace hangwatch::slowdown
