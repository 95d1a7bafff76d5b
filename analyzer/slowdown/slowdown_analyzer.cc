#include "hangwatch/slowdown/slowdown_analyzer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

#include "hangwatch/common/nccl_bandwidth.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string rankName(const RankProfile& p) {
  return "rank " + std::to_string(p.rank) + (p.host.empty() ? "" : " (" + p.host + ")");
}

bool alreadyFlagged(const SlowdownAnalysis& out, int rank) {
  for (const SlowdownFinding& f : out.findings)
    if (f.kind != "slow-link" && std::count(f.ranks.begin(), f.ranks.end(), rank)) return true;
  return false;
}

double p50Ns(const LogHistogram& h) { return h.empty() ? 0 : h.percentileNs(0.5); }

LogHistogram pooledExcept(const JobProfile& job, int except) {
  LogHistogram pooled;
  for (const auto& [rank, p] : job.ranks())
    if (rank != except) pooled.merge(p.issue_latency);
  return pooled;
}

// One communicator-wide collective key: the same op on every member.
struct CollectiveKey {
  std::string comm, name;
  uint64_t bytes = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

struct CommBandwidth {
  CollectiveKey key;
  int comm_size = 0;
  std::vector<int> members;
  double busbw_gbps = 0;
  double duration_ns = 0;
  size_t instances = 0;  // aligned instances behind the figure (0: from the windows)
};

// A collective's transfer time is end - (last member's start): waiting for a late rank
// is not the link's fault. Per instance the median member end is used; per key the
// median instance. Without timelines the fastest member's mean time stands in.
std::vector<CommBandwidth> communicatorBandwidth(const JobProfile& job) {
  std::map<CollectiveKey, std::map<uint64_t, std::vector<std::pair<int64_t, int64_t>>>> by_seq;
  std::map<CollectiveKey, int> sizes;
  for (const auto& [rank, p] : job.ranks())
    for (const CollectiveInstance& c : p.collective_instances) {
      CollectiveKey k{c.comm, c.name, c.bytes};
      by_seq[k][c.seq].emplace_back(c.start_ns, c.end_ns);
      sizes[k] = c.comm_size;
    }
  std::vector<CommBandwidth> out;
  std::set<CollectiveKey> done;
  for (const auto& [key, seqs] : by_seq) {
    std::vector<double> durations;
    for (const auto& [seq, spans] : seqs) {
      if (static_cast<int>(spans.size()) < sizes[key]) continue;
      int64_t last_start = 0;
      std::vector<double> ends;
      for (auto [s, e] : spans) {
        last_start = std::max(last_start, s);
        ends.push_back(static_cast<double>(e));
      }
      double d = median(ends) - static_cast<double>(last_start);
      if (d > 0) durations.push_back(d);
    }
    auto factor = busBandwidthFactor(key.name, sizes[key]);
    if (durations.size() < 5 || !factor) continue;
    CommBandwidth b;
    b.key = key;
    b.comm_size = sizes[key];
    b.duration_ns = median(durations);
    b.busbw_gbps = gigabytesPerSecond(ncclTestsSizeBytes(key.name, key.bytes, b.comm_size), b.duration_ns) * *factor;
    b.instances = durations.size();
    out.push_back(b);
    done.insert(key);
  }
  std::map<CollectiveKey, CommBandwidth> fallback;
  for (const auto& [rank, p] : job.ranks())
    for (const auto& [k, c] : p.collectives) {
      CollectiveKey key{c.comm, c.name, c.bytes};
      auto bw = c.busbw_gbps();
      if (done.count(key) || !bw) continue;
      CommBandwidth& b = fallback[key];
      b.key = key;
      b.comm_size = c.comm_size;
      if (*bw > b.busbw_gbps) {
        b.busbw_gbps = *bw;
        b.duration_ns = static_cast<double>(c.ns) / static_cast<double>(c.count);
      }
    }
  for (auto& [k, b] : fallback) out.push_back(b);
  for (CommBandwidth& b : out) {
    auto it = job.communicators().find(b.key.comm);
    if (it != job.communicators().end()) b.members = it->second.members();
  }
  return out;
}

}  // namespace

SlowdownAnalysis SlowdownAnalyzer::analyze(const JobProfile& job, const JobProfile* baseline) const {
  SlowdownAnalysis out;
  out.notes = job.problems();
  if (job.ranks().size() < t_.min_ranks)
    out.notes.push_back("only " + std::to_string(job.ranks().size()) +
                        " rank(s) with metrics: ranks are not compared with each other");
  slowGpus(job, out);
  issueStalls(job, out);
  hostAndDataloaderStalls(job, out);
  intraStepVoid(job, out);
  bottleneckLinks(job, out);
  slowLinks(job, baseline, out);
  if (baseline != nullptr) baselineShifts(job, *baseline, out);
  for (SlowdownFinding& f : out.findings) std::sort(f.ranks.begin(), f.ranks.end());
  out.metrics = measurements(job);
  return out;
}

void SlowdownAnalyzer::slowGpus(const JobProfile& job, SlowdownAnalysis& out) const {
  if (job.ranks().size() < t_.min_ranks) return;
  // Per shape: the group's TFLOPS; a rank is slow when it is low on the shapes that
  // hold most of its GEMM time (so one odd small shape does not decide).
  std::map<std::string, std::vector<double>> by_shape;
  for (const auto& [rank, p] : job.ranks())
    for (const auto& [shape, g] : p.gemmsForFlops())
      if (g.count > 0) by_shape[shape].push_back(g.tflops());
  for (const auto& [rank, p] : job.ranks()) {
    int64_t slow_ns = 0, total_ns = 0;
    double worst_ratio = 1, value = 0, group = 0;
    std::string worst_shape;
    for (const auto& [shape, g] : p.gemmsForFlops()) {
      const auto& values = by_shape[shape];
      if (values.size() < t_.min_ranks || g.count == 0) continue;
      RobustSpread s = robustSpread(values, t_.spread_floor);
      total_ns += g.ns;
      double ratio = s.median > 0 ? g.tflops() / s.median : 1;
      if (robustZ(g.tflops(), s) <= -t_.outlier_z && ratio <= t_.slow_gpu_ratio) {
        slow_ns += g.ns;
        if (ratio < worst_ratio) {
          worst_ratio = ratio;
          value = g.tflops();
          group = s.median;
          worst_shape = shape;
        }
      }
    }
    if (total_ns == 0 || slow_ns * 2 < total_ns) continue;
    SlowdownFinding f;
    f.kind = "slow-gpu";
    f.ranks = {rank};
    f.metric = "gemm_tflops[" + worst_shape + "]";
    f.value = value;
    f.group_median = group;
    f.owner = "operations";
    f.evidence.push_back(rankName(p) + " runs GEMM " + worst_shape + " at " + fmt("%.4g", value) +
                         " TFLOPS against a group median of " + fmt("%.4g", group) + " (" +
                         fmt("%.0f", 100 * worst_ratio) + "%); low on shapes holding " +
                         fmt("%.0f", 100.0 * slow_ns / total_ns) + "% of its GEMM time");
    if (!p.gemms_alone.empty())
      f.evidence.push_back("TFLOPS counted from GEMMs that overlapped no communication kernel where there were enough");
    out.findings.push_back(std::move(f));
  }
}

void SlowdownAnalyzer::issueStalls(const JobProfile& job, SlowdownAnalysis& out) const {
  if (job.ranks().size() < t_.min_ranks) return;
  std::vector<double> p50s, syncs;
  for (const auto& [rank, p] : job.ranks()) {
    if (p.issue_latency.empty()) continue;
    p50s.push_back(p50Ns(p.issue_latency));
    syncs.push_back(p.syncsPerStep());
  }
  if (p50s.size() < t_.min_ranks) return;
  const double group_p50 = median(p50s);
  const double group_syncs = median(syncs);
  if (group_p50 < static_cast<double>(t_.issue_min_group_p50_ns)) return;
  for (const auto& [rank, p] : job.ranks()) {
    if (p.issue_latency.empty() || alreadyFlagged(out, rank)) continue;
    double p50 = p50Ns(p.issue_latency);
    double w1 = LogHistogram::wasserstein1Ns(p.issue_latency, pooledExcept(job, rank));
    if (p50 > t_.issue_collapse_ratio * group_p50 || w1 < t_.issue_w1_fraction * group_p50) continue;
    // A collapse alone can be a starved host thread (CPU contention on the node); the
    // finding wants the user-code cause the metrics can show: extra synchronizations.
    if (!(p.syncsPerStep() >= t_.sync_ratio * group_syncs && p.syncsPerStep() >= group_syncs + 2)) {
      out.notes.push_back(rankName(p) + ": kernel issue latency collapsed (p50 " + fmt("%.1f", p50 / 1e3) + " us, group " +
                          fmt("%.1f", group_p50 / 1e3) + " us) without extra synchronizations; not flagged (a busy or "
                          "starved host thread looks the same)");
      continue;
    }
    SlowdownFinding f;
    f.kind = "issue-stall";
    f.ranks = {rank};
    f.metric = "issue_latency_p50_us";
    f.value = p50 / 1e3;
    f.group_median = group_p50 / 1e3;
    f.owner = "algorithm";
    f.evidence.push_back(rankName(p) + ": kernels start " + fmt("%.1f", p50 / 1e3) +
                         " us after their launch (median), the group " + fmt("%.1f", group_p50 / 1e3) +
                         " us: the GPU runs dry, the host no longer queues work ahead");
    f.evidence.push_back("Wasserstein-1 distance to the other ranks' issue latency: " + fmt("%.1f", w1 / 1e3) + " us");
    f.evidence.push_back(fmt("%.1f", p.syncsPerStep()) + " host synchronizations per step against " +
                         fmt("%.1f", group_syncs) + " on the other ranks (" +
                         fmt("%.1f", p.sync_ns / 1e6 / std::max<double>(p.steps, 1)) +
                         " ms per step blocked): look for an unnecessary synchronize");
    out.findings.push_back(std::move(f));
  }
}

void SlowdownAnalyzer::hostAndDataloaderStalls(const JobProfile& job, SlowdownAnalysis& out) const {
  if (job.ranks().size() < t_.min_ranks) return;
  std::vector<double> fractions;
  for (const auto& [rank, p] : job.ranks())
    if (p.inter_step_void_ns) fractions.push_back(p.interStepVoidFraction());
  if (fractions.size() < t_.min_ranks) return;
  RobustSpread s = robustSpread(fractions, t_.spread_floor);
  for (const auto& [rank, p] : job.ranks()) {
    if (!p.inter_step_void_ns || alreadyFlagged(out, rank)) continue;
    double v = p.interStepVoidFraction();
    if (robustZ(v, s) < t_.outlier_z || v < t_.gap_ratio * s.median || v - s.median < t_.gap_min_fraction) continue;
    // Late in most steps: every batch arrives late (input pipeline). Late in a few:
    // intermittent host work (GC, checkpointing, logging) on the training thread.
    std::vector<double> other_gaps;
    for (const auto& [r, q] : job.ranks())
      if (r != rank)
        for (int64_t g : q.step_gaps_ns) other_gaps.push_back(static_cast<double>(g));
    const double typical = median(other_gaps);
    size_t late = 0;
    for (int64_t g : p.step_gaps_ns)
      if (static_cast<double>(g) > t_.late_step_ratio * typical + 1e6) ++late;
    const bool have_steps = p.step_gaps_ns.size() >= 5 && !other_gaps.empty();
    const double share = have_steps ? static_cast<double>(late) / static_cast<double>(p.step_gaps_ns.size()) : 1;
    SlowdownFinding f;
    f.kind = share >= t_.dataloader_step_share ? "dataloader-stall" : "host-stall";
    f.ranks = {rank};
    f.metric = "inter_step_void_pct";
    f.value = 100 * v;
    f.group_median = 100 * s.median;
    f.owner = "algorithm";
    f.evidence.push_back(rankName(p) + "'s GPU is idle between steps " + fmt("%.1f", 100 * v) + "% of the time, the group " +
                         fmt("%.1f", 100 * s.median) + "%: the other ranks wait for it inside the next collective");
    if (have_steps)
      f.evidence.push_back("the gap exceeds " + fmt("%.1f", (t_.late_step_ratio * typical + 1e6) / 1e6) + " ms in " +
                           std::to_string(late) + " of its last " + std::to_string(p.step_gaps_ns.size()) +
                           " steps: " +
                           (f.kind == "dataloader-stall" ? "nearly every batch is late (input pipeline)"
                                                         : "an intermittent host pause (GC, checkpoint, logging)"));
    out.findings.push_back(std::move(f));
  }
}

void SlowdownAnalyzer::intraStepVoid(const JobProfile& job, SlowdownAnalysis& out) const {
  if (job.ranks().size() < t_.min_ranks) return;
  std::vector<double> fractions;
  for (const auto& [rank, p] : job.ranks())
    fractions.push_back(p.voidFraction() - p.interStepVoidFraction());
  RobustSpread s = robustSpread(fractions, t_.spread_floor);
  for (const auto& [rank, p] : job.ranks()) {
    if (alreadyFlagged(out, rank)) continue;
    double v = p.voidFraction() - p.interStepVoidFraction();
    if (robustZ(v, s) < t_.outlier_z || v - s.median < t_.void_min_fraction) continue;
    SlowdownFinding f;
    f.kind = "void";
    f.ranks = {rank};
    f.metric = "intra_step_void_pct";
    f.value = 100 * v;
    f.group_median = 100 * s.median;
    f.owner = "infrastructure";
    f.evidence.push_back(rankName(p) + "'s GPU idles between kernels inside its steps " + fmt("%.1f", 100 * v) +
                         "% of the time, the group " + fmt("%.1f", 100 * s.median) + "%");
    out.findings.push_back(std::move(f));
  }
}

void SlowdownAnalyzer::bottleneckLinks(const JobProfile& job, SlowdownAnalysis& out) const {
  // Each member names itself in its own link records: comm rank -> global rank.
  std::map<std::string, std::map<int, int>> global_of;
  for (const auto& [rank, p] : job.ranks())
    for (const auto& [key, l] : p.links) global_of[l.nccl_comm][l.comm_rank] = rank;
  struct Wire {
    int from;
    int to;
    int comm_size;
    double share;  // of the sender's measured time with data on the wire
    uint64_t bytes;
    int64_t busy_ns;
  };
  std::map<std::string, std::vector<Wire>> by_comm;
  for (const auto& [rank, p] : job.ranks()) {
    if (p.window_ns <= 0) continue;
    for (const auto& [key, l] : p.links) {
      const std::map<int, int>& members = global_of[l.nccl_comm];
      auto to = members.find(l.peer);
      if (to == members.end()) continue;  // the receiver sent nothing on this communicator
      by_comm[l.nccl_comm].push_back({rank, to->second, l.comm_size,
                                      static_cast<double>(l.busy_ns) / static_cast<double>(p.window_ns), l.bytes,
                                      l.busy_ns});
    }
  }
  auto hostOf = [&](int rank) {
    auto it = job.ranks().find(rank);
    return it == job.ranks().end() || it->second.host.empty() ? std::string() : " (" + it->second.host + ")";
  };
  // The watchdog's hash of the same communicator: the one with the same members.
  auto watchdogHash = [&](const std::string& nccl_comm, int size) {
    std::vector<int> members;
    for (const auto& [cr, g] : global_of[nccl_comm]) members.push_back(g);
    std::sort(members.begin(), members.end());
    std::string found;
    for (const auto& [hash, c] : job.communicators()) {
      if (c.size != size || c.members() != members) continue;
      if (!found.empty()) return std::string();  // two alike: do not guess
      found = hash;
    }
    return found;
  };
  std::map<std::pair<int, int>, SlowdownFinding> named;
  for (const auto& [nccl_comm, wires] : by_comm) {
    if (wires.size() < 2) continue;
    for (size_t i = 0; i < wires.size(); ++i) {
      std::vector<double> others;
      for (size_t j = 0; j < wires.size(); ++j)
        if (j != i) others.push_back(wires[j].share);
      const double ref = median(others);
      const Wire& w = wires[i];
      if (w.share < t_.link_wire_ratio * ref || w.share - ref < t_.link_wire_points) continue;
      const std::string hash = watchdogHash(nccl_comm, w.comm_size);
      const std::string comm_name = "communicator " + (hash.empty() ? "(NCCL id " + nccl_comm + ")" : hash) + " (" +
                                    std::to_string(w.comm_size) + " ranks)";
      const std::string line = "link " + std::to_string(w.from) + "->" + std::to_string(w.to) + " has data on the wire " +
                               fmt("%.1f", 100 * w.share) + "% of the time, the other " + std::to_string(others.size()) +
                               " link(s) of " + comm_name + " " + fmt("%.1f", 100 * ref) + "% (median)";
      auto [it, fresh] = named.try_emplace({w.from, w.to});
      SlowdownFinding& f = it->second;
      if (!fresh) {
        f.evidence.push_back("it is the bottleneck of " + comm_name + " too: " + line);
        continue;
      }
      f.kind = "slow-link";
      f.ranks = {w.from, w.to};
      f.link = RingLink{w.from, w.to};
      f.communicator = hash;
      f.metric = "link_wire_pct";
      f.value = 100 * w.share;
      f.group_median = 100 * ref;
      f.owner = "operations";
      f.evidence.push_back(line + ": the ring waits on it (NCCL proxy steps, SendWait until done)");
      f.evidence.push_back("it moved " + fmt("%.1f", static_cast<double>(w.bytes) / 1e6) + " MB at " +
                           fmt("%.3g", w.busy_ns > 0 ? static_cast<double>(w.bytes) / static_cast<double>(w.busy_ns) : 0.0) +
                           " GB/s while busy; the senders upstream of it wait for credits instead");
      f.evidence.push_back("check the NIC, cable and switch ports between rank " + std::to_string(w.from) + hostOf(w.from) +
                           " and rank " + std::to_string(w.to) + hostOf(w.to));
    }
  }
  for (auto& [link, f] : named) out.findings.push_back(std::move(f));
}

void SlowdownAnalyzer::slowLinks(const JobProfile& job, const JobProfile* baseline, SlowdownAnalysis& out) const {
  const std::vector<CommBandwidth> bws = communicatorBandwidth(job);
  const std::vector<CommBandwidth> base = baseline ? communicatorBandwidth(*baseline) : std::vector<CommBandwidth>{};
  std::set<std::string> slow_comms, judged_ok;
  struct Slow {
    const CommBandwidth* bw;
    double reference;
    std::string against;
  };
  std::vector<Slow> slow;
  for (const CommBandwidth& b : bws) {
    // Peers: other communicators running the same collective on the same size and bytes.
    std::vector<double> peers;
    for (const CommBandwidth& o : bws)
      if (o.key.comm != b.key.comm && o.key.name == b.key.name && o.key.bytes == b.key.bytes &&
          o.comm_size == b.comm_size)
        peers.push_back(o.busbw_gbps);
    std::optional<Slow> verdict;
    bool judged = false;
    if (!peers.empty()) {
      judged = true;
      double ref = median(peers);
      if (b.busbw_gbps < t_.link_ratio * ref)
        verdict = Slow{&b, ref, "the median of " + std::to_string(peers.size()) + " communicator(s) running the same collective"};
    }
    for (const CommBandwidth& o : base) {
      // Hashes differ between runs: match the same members, collective and size.
      if (o.key.name != b.key.name || o.key.bytes != b.key.bytes || o.members != b.members || b.members.empty())
        continue;
      judged = true;
      if (!verdict && b.busbw_gbps < t_.baseline_link_ratio * o.busbw_gbps)
        verdict = Slow{&b, o.busbw_gbps, "the baseline run"};
    }
    if (verdict) {
      slow.push_back(*verdict);
      slow_comms.insert(b.key.comm);
    } else if (judged) {
      judged_ok.insert(b.key.comm);
    }
  }
  // Network tomography over ring links: a link on every slow ring and on no healthy one.
  std::set<std::pair<int, int>> candidates;
  bool first = true;
  for (const std::string& c : slow_comms) {
    auto it = job.communicators().find(c);
    std::vector<std::pair<int, int>> links = it != job.communicators().end() ? it->second.ringLinks()
                                                                            : std::vector<std::pair<int, int>>{};
    std::set<std::pair<int, int>> mine(links.begin(), links.end());
    if (first) {
      candidates = mine;
      first = false;
    } else {
      std::set<std::pair<int, int>> both;
      std::set_intersection(candidates.begin(), candidates.end(), mine.begin(), mine.end(),
                            std::inserter(both, both.begin()));
      candidates = both;
    }
  }
  for (const std::string& c : judged_ok) {
    auto it = job.communicators().find(c);
    if (it == job.communicators().end()) continue;
    for (const auto& l : it->second.ringLinks()) candidates.erase(l);
  }
  // Named link: one finding for it, on the communicator that slowed down most.
  std::optional<RingLink> named;
  if (candidates.size() == 1) named = RingLink{candidates.begin()->first, candidates.begin()->second};
  std::sort(slow.begin(), slow.end(), [](const Slow& a, const Slow& b) {
    return a.bw->busbw_gbps / a.reference < b.bw->busbw_gbps / b.reference;
  });
  std::set<std::string> reported;
  // A slow communicator whose ring holds a link already named from its wire time is
  // explained by it: one finding per link, the communicator's slowdown as its evidence.
  auto namedOnRing = [&](const std::string& comm) -> SlowdownFinding* {
    auto c = job.communicators().find(comm);
    if (c == job.communicators().end()) return nullptr;
    const std::vector<std::pair<int, int>> ring = c->second.ringLinks();
    for (SlowdownFinding& f : out.findings)
      if (f.kind == "slow-link" && f.link &&
          std::find(ring.begin(), ring.end(), std::make_pair(f.link->from, f.link->to)) != ring.end())
        return &f;
    return nullptr;
  };
  for (const Slow& s : slow) {
    if (!reported.insert(s.bw->key.comm).second) continue;
    if (SlowdownFinding* link = namedOnRing(s.bw->key.comm)) {
      link->evidence.push_back("communicator " + s.bw->key.comm + " (" + std::to_string(s.bw->comm_size) +
                               " ranks), whose ring holds it, moves " + s.bw->key.name + " at " +
                               fmt("%.3g", s.bw->busbw_gbps) + " GB/s bus bandwidth against " +
                               fmt("%.3g", s.reference) + " GB/s for " + s.against);
      continue;
    }
    SlowdownFinding f;
    f.kind = "slow-link";
    f.ranks = s.bw->members;
    f.communicator = s.bw->key.comm;
    f.metric = "busbw_gbps[" + s.bw->key.name + " " + std::to_string(s.bw->key.bytes) + "B]";
    f.value = s.bw->busbw_gbps;
    f.group_median = s.reference;
    f.owner = "operations";
    f.evidence.push_back("communicator " + s.bw->key.comm + " (" + std::to_string(s.bw->comm_size) + " ranks) moves " +
                         s.bw->key.name + " at " + fmt("%.3g", s.bw->busbw_gbps) + " GB/s bus bandwidth against " +
                         fmt("%.3g", s.reference) + " GB/s for " + s.against);
    if (s.bw->instances > 0)
      f.evidence.push_back("timed from the last member's start to the median member's end over " +
                           std::to_string(s.bw->instances) + " aligned instances, so late ranks are not counted");
    if (named) {
      f.link = named;
      f.evidence.push_back("link " + std::to_string(named->from) + "->" + std::to_string(named->to) +
                           " is the only ring link shared by every slow communicator and by no healthy one");
      for (const Slow& other : slow)
        if (reported.insert(other.bw->key.comm).second)
          f.evidence.push_back("communicator " + other.bw->key.comm + " (" + std::to_string(other.bw->comm_size) +
                               " ranks) is slow too: " + other.bw->key.name + " at " + fmt("%.3g", other.bw->busbw_gbps) +
                               " GB/s against " + fmt("%.3g", other.reference));
      f.ranks = {named->from, named->to};
    } else {
      std::string list;
      for (const auto& [a, b] : candidates) list += (list.empty() ? "" : ", ") + std::to_string(a) + "->" + std::to_string(b);
      f.evidence.push_back("a ring runs at its slowest link, so every member sees the same bandwidth; the link cannot be "
                           "singled out from these communicators" +
                           (list.empty() ? std::string() : " (candidates: " + list + ")"));
    }
    out.findings.push_back(std::move(f));
  }
}

void SlowdownAnalyzer::baselineShifts(const JobProfile& job, const JobProfile& baseline, SlowdownAnalysis& out) const {
  std::vector<double> base_p50s, base_voids, base_syncs;
  LogHistogram base_pool;
  for (const auto& [rank, p] : baseline.ranks()) {
    if (!p.issue_latency.empty()) base_p50s.push_back(p50Ns(p.issue_latency));
    base_pool.merge(p.issue_latency);
    base_voids.push_back(p.voidFraction());
    base_syncs.push_back(p.syncsPerStep());
  }
  const double base_p50 = median(base_p50s);
  const double base_syncs_median = median(base_syncs);
  std::vector<int> shifted;
  std::vector<double> shifted_p50s, shifted_w1, shifted_syncs;
  if (base_p50 >= static_cast<double>(t_.issue_min_group_p50_ns)) {
    for (const auto& [rank, p] : job.ranks()) {
      if (p.issue_latency.empty() || alreadyFlagged(out, rank)) continue;
      double p50 = p50Ns(p.issue_latency);
      double w1 = LogHistogram::wasserstein1Ns(p.issue_latency, base_pool);
      if (p50 > t_.issue_collapse_ratio * base_p50 || w1 < t_.issue_w1_fraction * base_p50) continue;
      if (!(p.syncsPerStep() >= t_.sync_ratio * base_syncs_median && p.syncsPerStep() >= base_syncs_median + 2)) continue;
      shifted.push_back(rank);
      shifted_p50s.push_back(p50);
      shifted_w1.push_back(w1);
      shifted_syncs.push_back(p.syncsPerStep());
    }
  }
  if (!shifted.empty()) {
    SlowdownFinding f;
    f.kind = "issue-stall";
    f.ranks = shifted;
    f.metric = "issue_latency_p50_us";
    f.value = median(shifted_p50s) / 1e3;
    f.group_median = base_p50 / 1e3;
    f.owner = "algorithm";
    f.evidence.push_back(std::to_string(shifted.size()) + " rank(s) start kernels " + fmt("%.1f", f.value) +
                         " us after launch (median) against " + fmt("%.1f", f.group_median) +
                         " us in the baseline run: the host no longer queues work ahead of the GPU");
    f.evidence.push_back("Wasserstein-1 shift from the baseline's issue latency: " +
                         fmt("%.1f", median(shifted_w1) / 1e3) + " us");
    f.evidence.push_back(fmt("%.1f", median(shifted_syncs)) + " host synchronizations per step against " +
                         fmt("%.1f", base_syncs_median) + " in the baseline: look for an unnecessary synchronize");
    out.findings.push_back(std::move(f));
  }
  const double base_void = median(base_voids);
  std::vector<int> idle;
  std::vector<double> idle_values;
  for (const auto& [rank, p] : job.ranks()) {
    if (alreadyFlagged(out, rank)) continue;
    if (p.voidFraction() - base_void >= t_.baseline_void_points && p.voidFraction() >= 1.5 * base_void) {
      idle.push_back(rank);
      idle_values.push_back(p.voidFraction());
    }
  }
  // A few ranks idling more than the baseline are judged against the rest of this run
  // (host, dataloader and in-step void checks); the baseline decides only what the whole
  // job shifted. On a loaded CI machine one rank's void moved 14% -> 25% with no cause.
  if (!idle.empty() && 2 * idle.size() < job.ranks().size()) {
    out.notes.push_back(std::to_string(idle.size()) + " of " + std::to_string(job.ranks().size()) +
                        " rank(s) idle more than in the baseline run (" + fmt("%.1f", 100 * median(idle_values)) +
                        "% against " + fmt("%.1f", 100 * base_void) + "%), but not the job as a whole: not flagged");
    idle.clear();
  }
  if (!idle.empty()) {
    SlowdownFinding f;
    f.kind = "void";
    f.ranks = idle;
    f.metric = "void_pct";
    f.value = 100 * median(idle_values);
    f.group_median = 100 * base_void;
    f.owner = "infrastructure";
    f.evidence.push_back(std::to_string(idle.size()) + " rank(s) leave the GPU idle " + fmt("%.1f", f.value) +
                         "% of the time against " + fmt("%.1f", f.group_median) + "% in the baseline run");
    out.findings.push_back(std::move(f));
  }
}

nlohmann::json SlowdownAnalyzer::measurements(const JobProfile& job) const {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& [rank, p] : job.ranks()) {
    nlohmann::json gemms = nlohmann::json::object();
    for (const auto& [shape, g] : p.gemmsForFlops()) gemms[shape] = {{"tflops", g.tflops()}, {"count", g.count}};
    nlohmann::json colls = nlohmann::json::array();
    for (const auto& [k, c] : p.collectives) {
      auto bw = c.busbw_gbps();
      colls.push_back({{"name", c.name}, {"comm", c.comm}, {"bytes", c.bytes}, {"count", c.count},
                       {"busbw_gbps", bw ? nlohmann::json(*bw) : nlohmann::json(nullptr)}});
    }
    nlohmann::json il = {{"p10_us", p.issue_latency.percentileNs(0.1) / 1e3},
                         {"p50_us", p.issue_latency.percentileNs(0.5) / 1e3},
                         {"p90_us", p.issue_latency.percentileNs(0.9) / 1e3},
                         {"count", p.issue_latency.count()}};
    ranks.push_back({{"rank", rank}, {"host", p.host}, {"windows", p.windows}, {"gemm", gemms},
                     {"collectives", colls}, {"issue_latency", il},
                     {"void_pct", 100 * p.voidFraction()}, {"inter_step_void_pct", 100 * p.interStepVoidFraction()},
                     {"sync_per_step", p.syncsPerStep()},
                     {"sync_ms_per_step", p.steps ? p.sync_ns / 1e6 / static_cast<double>(p.steps) : 0.0},
                     {"step_ms", p.stepMs()}, {"timeline", p.has_timeline}});
  }
  nlohmann::json comms = nlohmann::json::array();
  for (const CommBandwidth& b : communicatorBandwidth(job))
    comms.push_back({{"communicator", b.key.comm}, {"collective", b.key.name}, {"bytes", b.key.bytes},
                     {"ranks", b.members}, {"busbw_gbps", b.busbw_gbps}, {"time_us", b.duration_ns / 1e3},
                     {"aligned_instances", b.instances}});
  return {{"ranks", ranks}, {"communicators", comms}};
}

}  // namespace hangwatch::slowdown
