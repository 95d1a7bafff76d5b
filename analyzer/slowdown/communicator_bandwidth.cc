#include "hangwatch/slowdown/communicator_bandwidth.h"

#include <algorithm>
#include <map>
#include <set>

#include "hangwatch/common/nccl_bandwidth.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {

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

}  // namespace hangwatch::slowdown
