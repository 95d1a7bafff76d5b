#include "hangwatch/slowdown/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace hangwatch::slowdown {
namespace {

using nlohmann::json;

constexpr int kHostTid = 0;

json metadata(const char* what, int pid, int tid, const std::string& name) {
  json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

// Above every rank (Perfetto sorts processes by this index).
constexpr int kCriticalPathPid = 1 << 30;

void addPathTrack(json& events, const CriticalPathAnalysis& a, double t0_us, double from_us) {
  events.push_back(metadata("process_name", kCriticalPathPid, -1, "critical path"));
  events.push_back(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", kCriticalPathPid}, {"args", {{"sort_index", -1}}}});
  events.push_back(metadata("thread_name", kCriticalPathPid, 1, "critical path of each step"));
  for (const StepPath& s : a.steps)
    for (const PathSegment& seg : s.segments) {
      const double start = static_cast<double>(seg.start_ns) / 1e3, end = static_cast<double>(seg.end_ns) / 1e3;
      if (end < from_us) continue;
      const std::string what = seg.kind == "host" ? "host " + seg.op : seg.op + (seg.ops > 1 ? fmt::format(" x{}", seg.ops) : "");
      json args = {{"rank", seg.rank}, {"kind", seg.kind}, {"step", s.id}, {"step_ms", s.ms()}};
      if (auto st = a.stages.find(seg.rank); st != a.stages.end()) args["stage"] = st->second;
      events.push_back({{"ph", "X"}, {"name", fmt::format("rank {}: {}", seg.rank, what)}, {"cat", "critical-path"},
                        {"pid", kCriticalPathPid}, {"tid", 1}, {"ts", start - t0_us}, {"dur", std::max(end - start, 0.0)},
                        {"args", args}});
    }
}

}  // namespace

void ChromeTrace::addRank(const TimelineWindow& w) { ranks_.push_back(w); }

nlohmann::json ChromeTrace::build() const {
  double t0 = std::numeric_limits<double>::infinity(), t_end = -t0;
  for (const TimelineWindow& w : ranks_)
    for (const TimelineOp& o : w.ops) {
      t0 = std::min(t0, timelineUnixUs(w, o.issue_ns > 0 ? std::min(o.issue_ns, o.start_ns) : o.start_ns));
      t_end = std::max(t_end, timelineUnixUs(w, o.end_ns));
    }
  const double from = last_s_ > 0 ? std::max(t0, t_end - last_s_ * 1e6) : t0;
  if (!std::isfinite(t0)) t0 = 0;

  json events = json::array();
  // (comm, seq) -> (comm rank, pid, tid, ts) of each member's instance
  std::map<std::pair<std::string, uint64_t>, std::vector<std::tuple<int, int, int, double, std::string>>> flows;
  for (const TimelineWindow& w : ranks_) {
    const int pid = w.rank >= 0 ? w.rank : static_cast<int>(w.pid);
    events.push_back(metadata("process_name", pid, -1, fmt::format("rank {}{}", w.rank, w.host.empty() ? "" : " (" + w.host + ")")));
    events.push_back(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    events.push_back(metadata("thread_name", pid, kHostTid, "host"));
    std::map<std::string, int> stream_tids;
    auto tidOf = [&](const std::string& stream) {
      auto [it, added] = stream_tids.emplace(stream, static_cast<int>(stream_tids.size()) + 1);
      if (added) events.push_back(metadata("thread_name", pid, it->second, "stream " + stream));
      return it->second;
    };
    // Each op's slack in its step, where the critical path was read from the same file.
    const std::vector<int64_t>* slack = nullptr;
    if (critical_path_)
      if (auto it = critical_path_->op_slack_ns.find(w.rank);
          it != critical_path_->op_slack_ns.end() && it->second.size() == w.ops.size())
        slack = &it->second;
    for (size_t i = 0; i < w.ops.size(); ++i) {
      const TimelineOp& o = w.ops[i];
      const double start = timelineUnixUs(w, o.start_ns), end = timelineUnixUs(w, o.end_ns);
      if (end < from) continue;
      const int tid = tidOf(o.stream);
      json args = {{"class", o.cls}};
      if (slack && (*slack)[i] >= 0) args["slack_ms"] = static_cast<double>((*slack)[i]) / 1e6;
      if (!o.comm.empty()) {
        args["comm"] = o.comm;
        args["seq"] = o.seq;
        args["comm_rank"] = o.comm_rank;
        args["comm_size"] = o.comm_size;
      }
      if (o.bytes) args["bytes"] = o.bytes;
      if (!o.shape.empty()) args["shape"] = o.shape;
      if (o.issue_ns > 0) args["issue_latency_us"] = static_cast<double>(o.start_ns - o.issue_ns) / 1e3;
      events.push_back({{"ph", "X"}, {"name", o.name}, {"cat", o.cls}, {"pid", pid}, {"tid", tid},
                        {"ts", start - t0}, {"dur", std::max(end - start, 0.0)}, {"args", args}});
      if (o.issue_ns > 0)
        events.push_back({{"ph", "i"}, {"s", "t"}, {"name", "launch " + o.name}, {"cat", "issue"}, {"pid", pid},
                          {"tid", kHostTid}, {"ts", timelineUnixUs(w, o.issue_ns) - t0}});
      if (o.cls == "coll" && !o.comm.empty())
        flows[{o.comm, o.seq}].emplace_back(o.comm_rank, pid, tid, start - t0, o.name);
    }
    for (const TimelineSync& s : w.syncs) {
      const double start = timelineUnixUs(w, s.start_ns), end = timelineUnixUs(w, s.end_ns);
      if (end < from) continue;
      events.push_back({{"ph", "X"}, {"name", s.call}, {"cat", "sync"}, {"pid", pid}, {"tid", kHostTid},
                        {"ts", start - t0}, {"dur", std::max(end - start, 0.0)}});
    }
  }
  if (critical_path_) addPathTrack(events, *critical_path_, t0, from);
  uint64_t flow_id = 0;
  for (auto& [key, members] : flows) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());
    ++flow_id;
    for (size_t i = 0; i < members.size(); ++i) {
      const auto& [comm_rank, pid, tid, ts, name] = members[i];
      const char* ph = i == 0 ? "s" : (i + 1 == members.size() ? "f" : "t");
      json e = {{"ph", ph}, {"id", flow_id}, {"cat", "collective"}, {"name", fmt::format("{} {} #{}", name, key.first, key.second)},
                {"pid", pid}, {"tid", tid}, {"ts", ts}};
      if (i + 1 == members.size()) e["bp"] = "e";  // bind the arrow's end to the enclosing slice
      events.push_back(std::move(e));
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"},
          {"otherData", {{"producer", "forensics timeline"}, {"ranks", ranks_.size()}}}};
}

}  // namespace hangwatch::slowdown
