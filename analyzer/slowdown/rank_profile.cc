#include "hangwatch/slowdown/rank_profile.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "hangwatch/common/nccl_bandwidth.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

bool isCommunication(const std::string& cls) { return cls == "coll" || cls == "p2p"; }

// The anchor key the step tracker wrote: "<name> <comm> <bytes>".
std::optional<StepAnchor> anchorOf(const MetricsFile& metrics) {
  for (auto it = metrics.windows.rbegin(); it != metrics.windows.rend(); ++it) {
    if (!it->step || it->step->anchor.empty()) continue;
    std::istringstream in(it->step->anchor);
    StepAnchor k;
    if (in >> k.name >> k.comm >> k.bytes) return k;
  }
  return std::nullopt;
}

// Longest GPU idle gap inside each step, steps ending at each completion of the anchor.
std::vector<int64_t> stepGaps(const TimelineWindow& t, const StepAnchor& anchor) {
  std::vector<std::pair<int64_t, int64_t>> busy;
  std::vector<int64_t> step_ends;
  for (const TimelineOp& o : t.ops) {
    if (o.end_ns < o.start_ns || o.start_ns <= 0) continue;
    busy.emplace_back(o.start_ns, o.end_ns);
    if (anchor.closes(o)) step_ends.push_back(o.end_ns);
  }
  std::sort(busy.begin(), busy.end());
  std::sort(step_ends.begin(), step_ends.end());
  std::vector<int64_t> gaps;
  size_t next = 0;
  int64_t covered = 0;  // end of the union of busy intervals so far
  for (size_t s = 1; s < step_ends.size(); ++s) {
    const int64_t from = step_ends[s - 1], to = step_ends[s];
    covered = std::max(covered, from);
    int64_t longest = 0;
    while (next < busy.size() && busy[next].first < to) {
      auto [start, end] = busy[next++];
      if (start > covered) longest = std::max(longest, start - covered);
      covered = std::max(covered, end);
    }
    gaps.push_back(longest);
  }
  return gaps;
}

std::map<std::string, GemmShapeTotals> gemmsAlone(const TimelineWindow& t) {
  std::vector<std::pair<int64_t, int64_t>> comm;
  for (const TimelineOp& o : t.ops)
    if (isCommunication(o.cls)) comm.emplace_back(o.start_ns, o.end_ns);
  std::sort(comm.begin(), comm.end());
  // Prefix maximum of ends, so one binary search answers "does anything overlap".
  std::vector<int64_t> max_end(comm.size());
  for (size_t i = 0; i < comm.size(); ++i) max_end[i] = std::max(comm[i].second, i ? max_end[i - 1] : 0);
  std::map<std::string, GemmShapeTotals> out;
  for (const TimelineOp& o : t.ops) {
    if (o.cls != "gemm" || o.shape.empty() || o.end_ns <= o.start_ns) continue;
    auto it = std::lower_bound(comm.begin(), comm.end(), std::make_pair(o.end_ns, INT64_MIN));
    size_t before = static_cast<size_t>(it - comm.begin());  // intervals starting before the GEMM ends
    if (before > 0 && max_end[before - 1] > o.start_ns) continue;
    GemmShapeTotals& g = out[o.shape];
    g.flops += o.flops;
    g.ns += o.end_ns - o.start_ns;
    ++g.count;
  }
  return out;
}

}  // namespace

std::optional<double> CollectiveTotals::busbw_gbps() const {
  auto factor = busBandwidthFactor(name, comm_size);
  if (!factor || count == 0 || ns <= 0) return std::nullopt;
  double mean_ns = static_cast<double>(ns) / static_cast<double>(count);
  return gigabytesPerSecond(ncclTestsSizeBytes(name, bytes, comm_size), mean_ns) * *factor;
}

double RankProfile::interStepVoidFraction() const {
  return inter_step_void_ns && window_ns > 0 ? static_cast<double>(*inter_step_void_ns) / window_ns : 0;
}

double RankProfile::syncsPerStep() const {
  return steps > 0 ? static_cast<double>(sync_count) / static_cast<double>(steps) : 0;
}

double RankProfile::stepMs() const { return median(step_p50_ns) / 1e6; }

std::map<std::string, GemmShapeTotals> RankProfile::gemmsForFlops() const {
  std::map<std::string, GemmShapeTotals> out = gemms;
  // Enough lone samples of a shape replace the window totals for that shape.
  for (const auto& [shape, g] : gemms_alone)
    if (g.count >= 8) out[shape] = g;
  return out;
}

RankProfile profileRank(const MetricsFile& metrics, const TimelineWindow* timeline) {
  RankProfile p;
  p.bad_lines = metrics.bad_lines;
  const size_t skip = metrics.windows.size() >= 3 ? 1 : 0;
  for (size_t i = 0; i < metrics.windows.size(); ++i) {
    const MetricsWindow& w = metrics.windows[i];
    if (p.rank < 0) p.rank = w.rank;
    if (p.host.empty()) p.host = w.host;
    if (i < skip) continue;
    ++p.windows;
    p.window_ns += std::max<int64_t>(w.end_mono_ns - w.start_mono_ns, 0);
    for (const OpWindowStats& o : w.ops) {
      if (o.cls == "gemm" && o.tflops && o.total_ns > 0) {
        GemmShapeTotals& g = p.gemms[o.shape];
        g.flops += *o.tflops * 1e12 * static_cast<double>(o.total_ns) / 1e9;
        g.ns += o.total_ns;
        g.count += o.count;
      } else if (o.cls == "coll") {
        CollectiveTotals& c = p.collectives[fmt::format("{} {} {}", o.name, o.comm, o.bytes)];
        c.comm = o.comm;
        c.name = o.name;
        c.bytes = o.bytes;
        c.comm_size = o.comm_size;
        if (o.comm_rank) c.comm_rank = o.comm_rank;  // a window without it keeps what others said
        c.count += o.count;
        c.ns += o.total_ns;
      }
    }
    for (const LinkWindowStats& l : w.links) {
      LinkTotals& t = p.links[fmt::format("{} {} {}", l.comm, l.comm_rank, l.peer)];
      t.nccl_comm = l.comm;
      t.comm_size = l.comm_size;
      t.comm_rank = l.comm_rank;
      t.peer = l.peer;
      t.bytes += l.bytes;
      t.steps += l.steps;
      t.busy_ns += l.busy_ns;
    }
    for (const auto& [cls, h] : w.issue_latency)
      if (!isCommunication(cls)) p.issue_latency.merge(h);
    p.busy_ns += w.busy_ns;
    p.void_ns += w.void_ns;
    if (w.inter_step_void_ns) p.inter_step_void_ns = p.inter_step_void_ns.value_or(0) + *w.inter_step_void_ns;
    p.sync_count += w.sync_count;
    p.sync_ns += w.sync_ns;
    if (w.step && w.step->count > 0) {
      p.steps += w.step->count;
      p.step_ns += w.step->total_ns;
      p.step_p50_ns.push_back(w.step->p50_ns);
    }
  }
  if (timeline != nullptr) {
    p.has_timeline = true;
    if (p.rank < 0) p.rank = timeline->rank;
    if (p.host.empty()) p.host = timeline->host;
    p.step_anchor = anchorOf(metrics);
    if (p.step_anchor) p.step_gaps_ns = stepGaps(*timeline, *p.step_anchor);
    p.gemms_alone = gemmsAlone(*timeline);
    for (const TimelineOp& o : timeline->ops)
      if (o.cls == "coll" && !o.comm.empty())
        p.collective_instances.push_back({o.comm, o.name, o.seq, o.bytes, o.comm_size, o.start_ns, o.end_ns});
  }
  return p;
}

}  // namespace hangwatch::slowdown
