// slow-link (named from the wire time): a network link whose data sits on the wire far
// longer than its communicator's other links is the ring's bottleneck; one whose data
// moves far slower while on the wire is degraded, whether or not the ring waits on it.
// Evidence: NCCL's profiler proxy steps (SendWait until done) on network connections,
// as a real job's profiler plugin sees them; on InfiniBand a sender waits for credits
// before SendWait, so a late receiver does not stretch the wire time.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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
  uint64_t steps;
  int64_t busy_ns;

  double gbps() const { return busy_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(busy_ns) : 0.0; }
  double stepBytes() const { return steps > 0 ? static_cast<double>(bytes) / static_cast<double>(steps) : 0.0; }
};

struct Wires {
  // Each member names itself in its own link records: comm rank -> global rank.
  std::map<std::string, std::map<int, int>> global_of;
  std::map<std::string, std::vector<Wire>> by_comm;
};

// A member that sends on no network connection of the communicator (on two nodes, every
// rank but the node's last) names itself in no link record. The watchdog's communicator
// of the same size that agrees with every known position fills those in, when it is the
// only one that does.
void completeMembers(const JobProfile& job, std::map<int, int>& global_of, int comm_size) {
  const CommunicatorInfo* match = nullptr;
  for (const auto& [hash, c] : job.communicators()) {
    if (c.size != comm_size) continue;
    bool agrees = true;
    for (const auto& [cr, g] : global_of) {
      auto it = c.global_by_comm_rank.find(cr);
      agrees = agrees && it != c.global_by_comm_rank.end() && it->second == g;
    }
    if (!agrees) continue;
    if (match != nullptr) return;  // two alike: do not guess
    match = &c;
  }
  if (match != nullptr)
    for (const auto& [cr, g] : match->global_by_comm_rank) global_of.try_emplace(cr, g);
}

Wires collectWires(const JobProfile& job) {
  Wires w;
  std::map<std::string, int> comm_size;
  for (const auto& [rank, p] : job.ranks())
    for (const auto& [key, l] : p.links) {
      w.global_of[l.nccl_comm][l.comm_rank] = rank;
      comm_size[l.nccl_comm] = l.comm_size;
    }
  for (auto& [nccl_comm, global_of] : w.global_of) completeMembers(job, global_of, comm_size[nccl_comm]);
  for (const auto& [rank, p] : job.ranks()) {
    if (p.window_ns <= 0) continue;
    for (const auto& [key, l] : p.links) {
      const std::map<int, int>& members = w.global_of[l.nccl_comm];
      auto to = members.find(l.peer);
      if (to == members.end()) continue;  // the receiver is known neither from its links nor its collectives
      w.by_comm[l.nccl_comm].push_back({rank, to->second, l.comm_size,
                                        static_cast<double>(l.busy_ns) / static_cast<double>(p.window_ns), l.bytes,
                                        l.steps, l.busy_ns});
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

// What singled the link out: `metric` and its value against the other links' median.
struct LinkVerdict {
  std::string metric;  // link_wire_pct (the ring waits on it) or link_wire_gbps (degraded)
  double value;
  double group_median;
  std::string line;
};

void nameLink(const JobProfile& job, const Wire& w, const LinkVerdict& v, const std::string& hash, SlowdownFinding& f) {
  f.kind = "slow-link";
  f.ranks = {w.from, w.to};
  f.link = RingLink{w.from, w.to};
  f.communicator = hash;
  f.metric = v.metric;
  f.value = v.value;
  f.group_median = v.group_median;
  f.owner = "operations";
  f.evidence.push_back(v.line);
  f.evidence.push_back(fmt::format("it moved {:.1f} MB at {:.3g} GB/s while busy{}", static_cast<double>(w.bytes) / 1e6,
                                   w.gbps(),
                                   v.metric == "link_wire_pct" ? "; the senders upstream of it wait for credits instead"
                                                               : ""));
  f.evidence.push_back(fmt::format("check the NIC, cable and switch ports between rank {}{} and rank {}{}", w.from,
                                   hostOf(job, w.from), w.to, hostOf(job, w.to)));
}

// The bottleneck rule: data on the wire 3x as long, and 15 points more, as the others'.
std::optional<LinkVerdict> waitedOn(const Wire& w, const std::vector<Wire>& others, const SlowdownThresholds& t,
                                    const std::string& comm_name) {
  std::vector<double> shares;
  for (const Wire& o : others) shares.push_back(o.share);
  const double ref = median(shares);
  if (w.share < t.link_wire_ratio * ref || w.share - ref < t.link_wire_points) return std::nullopt;
  return LinkVerdict{"link_wire_pct", 100 * w.share, 100 * ref,
                     fmt::format("link {}->{} has data on the wire {:.1f}% of the time, the other {} link(s) of {} "
                                 "{:.1f}% (median): the ring waits on it (NCCL proxy steps, SendWait until done)",
                                 w.from, w.to, 100 * w.share, shares.size(), comm_name, 100 * ref)};
}

// The degraded rule: the rate while on the wire against links with steps of a like size
// (a link of small steps is latency-bound, not slow). A receiver already named slow is
// left out: on sockets its sender's steps wait on the wire for it.
std::optional<LinkVerdict> degraded(const Wire& w, const std::vector<Wire>& others, const SlowdownThresholds& t,
                                    const std::string& comm_name, const SlowdownAnalysis& out) {
  if (w.busy_ns < t.link_rate_min_busy_ns || w.stepBytes() <= 0 || alreadyFlagged(out, w.to) ||
      alreadyFlagged(out, w.from))
    return std::nullopt;
  std::vector<double> rates;
  for (const Wire& o : others) {
    const double ratio = o.stepBytes() / w.stepBytes();
    if (o.busy_ns >= t.link_rate_min_busy_ns && ratio <= t.link_rate_step_bytes_ratio &&
        ratio >= 1 / t.link_rate_step_bytes_ratio)
      rates.push_back(o.gbps());
  }
  if (rates.empty()) return std::nullopt;
  const double ref = median(rates);
  if (w.gbps() > t.link_rate_ratio * ref) return std::nullopt;
  return LinkVerdict{"link_wire_gbps", w.gbps(), ref,
                     fmt::format("link {}->{} moves its data at {:.3g} GB/s while on the wire, {:.0f}% of the "
                                 "other {} link(s) of {} ({:.3g} GB/s, median): it is degraded (NCCL proxy "
                                 "steps, SendWait until done)",
                                 w.from, w.to, w.gbps(), 100 * w.gbps() / ref, rates.size(), comm_name, ref)};
}

}  // namespace

void detectBottleneckLinks(const DetectorInput& in, SlowdownAnalysis& out) {
  Wires all = collectWires(in.job);
  std::map<std::pair<int, int>, SlowdownFinding> named;
  std::set<std::tuple<int, int, std::string>> said;  // (link, NCCL comm) already in a finding
  // Bottlenecks first, on every communicator: a link the job waits on is named as such,
  // and what else it does (degraded on a communicator that does not wait) is evidence.
  for (bool bottleneck_pass : {true, false}) {
    for (const auto& [nccl_comm, wires] : all.by_comm) {
      if (wires.size() < 2) continue;
      for (size_t i = 0; i < wires.size(); ++i) {
        std::vector<Wire> others;
        for (size_t j = 0; j < wires.size(); ++j)
          if (j != i) others.push_back(wires[j]);
        const Wire& w = wires[i];
        if (said.count({w.from, w.to, nccl_comm}) != 0) continue;
        const std::string hash = watchdogHash(in.job, all.global_of[nccl_comm], w.comm_size);
        const std::string comm_name = fmt::format("communicator {} ({} ranks)",
                                                  hash.empty() ? "(NCCL id " + nccl_comm + ")" : hash, w.comm_size);
        std::optional<LinkVerdict> v =
            bottleneck_pass ? waitedOn(w, others, in.t, comm_name) : degraded(w, others, in.t, comm_name, out);
        if (!v) continue;
        said.insert({w.from, w.to, nccl_comm});
        auto [it, fresh] = named.try_emplace({w.from, w.to});
        if (fresh)
          nameLink(in.job, w, *v, hash, it->second);
        else
          it->second.evidence.push_back("on " + comm_name + " too: " + v->line);
      }
    }
  }
  for (auto& [link, f] : named) out.findings.push_back(std::move(f));
}

}  // namespace hangwatch::slowdown
