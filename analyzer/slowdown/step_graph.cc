#include "step_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace hangwatch::slowdown::step_graph {
namespace {

void addRankNodes(Graph& g, int rank, const TimelineWindow& w) {
  const int64_t offset = std::llround(w.clock_unix_s * 1e9) - w.clock_mono_ns;
  const int first = static_cast<int>(g.nodes.size());
  g.first_op[rank] = w.ops.data();
  for (const TimelineOp& o : w.ops) {
    if (o.start_ns <= 0 || o.end_ns < o.start_ns) continue;
    Node n;
    n.rank = rank;
    n.op = &o;
    n.issue = o.issue_ns > 0 ? o.issue_ns + offset : 0;
    n.start = o.start_ns + offset;
    n.end = o.end_ns + offset;
    g.nodes.push_back(n);
  }
  std::stable_sort(g.nodes.begin() + first, g.nodes.end(),
                   [](const Node& a, const Node& b) { return std::tie(a.start, a.end) < std::tie(b.start, b.end); });
  const int last = static_cast<int>(g.nodes.size());
  g.rank_nodes[rank] = {first, last};
  auto& by_end = g.by_end[rank];
  for (int i = first; i < last; ++i) by_end.emplace_back(g.nodes[i].end, i);
  std::sort(by_end.begin(), by_end.end());
  std::map<std::string, int> previous_on_stream;
  for (int i = first; i < last; ++i) {
    Node& n = g.nodes[i];
    auto [it, fresh] = previous_on_stream.try_emplace(n.op->stream, -1);
    n.stream_prev = it->second;
    it->second = i;
    n.group = i;
    // The transfers of one ncclGroupStart/End run as one kernel: same stream, same times.
    if (n.op->cls == "p2p" && n.stream_prev >= 0) {
      const Node& p = g.nodes[n.stream_prev];
      if (p.op->cls == "p2p" && p.start == n.start && p.end == n.end) {
        n.group = p.group;
        n.stream_prev = g.nodes[p.group].stream_prev;  // one kernel: it waited for what its first op did
      }
    }
  }
}

// Steps: the ids every rank closed, in order; a rank's step holds the ops that ended after its
// previous step's end, up to this one's (by end, not start: a transfer posted on another stream
// before the step's closing collective ended belongs to the step it completes in).
void addSteps(Graph& g, const std::map<int, RankTimeline>& ranks) {
  std::map<uint64_t, std::map<int, int64_t>> ends;  // id -> rank -> wall end
  for (const auto& [rank, rt] : ranks) {
    if (!rt.timeline) continue;
    const int64_t offset = std::llround(rt.timeline->clock_unix_s * 1e9) - rt.timeline->clock_mono_ns;
    for (const StepEnd& e : rt.step_ends) ends[e.id][rank] = e.end_ns + offset;
  }
  std::vector<uint64_t> common;
  for (const auto& [id, by_rank] : ends)
    if (by_rank.size() == g.rank_nodes.size()) common.push_back(id);
  for (size_t i = 1; i < common.size(); ++i) {
    Step s;
    s.id = common[i];
    for (const auto& [rank, end] : ends[common[i]]) s.end = std::max(s.end, end);
    for (const auto& [rank, end] : ends[common[i - 1]]) {
      s.start = std::max(s.start, end);
      s.rank_start[rank] = end;
    }
    g.steps.push_back(std::move(s));
  }
  for (size_t si = 0; si < g.steps.size(); ++si) {
    Step& s = g.steps[si];
    for (const auto& [rank, range] : g.rank_nodes) {
      const int64_t from = s.rank_start[rank], to = ends[s.id][rank];
      int closing = -1;
      for (int i = range.first; i < range.second; ++i) {
        Node& n = g.nodes[i];
        if (n.end <= from || n.end > to) continue;
        n.step = static_cast<int>(si);
        n.local = static_cast<int>(s.nodes.size());
        s.nodes.push_back(i);
        if (n.end <= to && (closing < 0 || n.end > g.nodes[closing].end)) closing = i;
      }
      if (closing >= 0) s.closing[rank] = closing;
    }
  }
}

void joinCollectives(Graph& g) {
  std::map<std::pair<std::string, uint64_t>, std::vector<int>> by_key;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const TimelineOp& o = *g.nodes[i].op;
    if (o.cls == "coll" && !o.comm.empty()) by_key[{o.comm, o.seq}].push_back(static_cast<int>(i));
  }
  for (auto& [key, members] : by_key) {
    if (members.size() < 2) continue;
    for (int m : members) g.nodes[m].collective = static_cast<int>(g.collectives.size());
    g.collectives.push_back(std::move(members));
  }
}

// The k-th send from a to b on a communicator meets the k-th receive at b from a (NCCL matches
// a pair's transfers in order). The watchdog numbers each (timeline seq, from 1): those match
// exactly, wherever the ranks' windows begin and whatever step each was assigned to. Without a
// number (a peer it did not count, an older file) the k-th of each side within one step.
void matchTransfers(Graph& g) {
  using Numbered = std::tuple<std::string, int, int, uint64_t>;  // comm, from, to (comm ranks), k
  std::map<Numbered, std::pair<int, int>> numbered;
  using Key = std::tuple<int, std::string, int, int>;  // step, comm, from, to (comm ranks)
  std::map<Key, std::pair<std::vector<int>, std::vector<int>>> lanes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const TimelineOp& o = *n.op;
    if (o.cls != "p2p" || o.comm.empty() || o.comm_rank < 0 || o.peer < 0) continue;
    const bool send = o.name == "ncclSend";
    if (!send && o.name != "ncclRecv") continue;
    const int from = send ? o.comm_rank : o.peer, to = send ? o.peer : o.comm_rank;
    if (o.seq > 0) {
      auto& [s, r] = numbered.try_emplace({o.comm, from, to, o.seq}, -1, -1).first->second;
      (send ? s : r) = static_cast<int>(i);
    } else if (n.step >= 0) {
      auto& lane = lanes[{n.step, o.comm, from, to}];
      (send ? lane.first : lane.second).push_back(static_cast<int>(i));
    }
  }
  for (const auto& [key, pair] : numbered)
    if (pair.first >= 0 && pair.second >= 0) {
      g.nodes[pair.first].peer = pair.second;
      g.nodes[pair.second].peer = pair.first;
    }
  size_t unmatched = 0;
  for (auto& [key, lane] : lanes) {
    const size_t n = std::min(lane.first.size(), lane.second.size());
    unmatched += lane.first.size() + lane.second.size() - 2 * n;
    for (size_t k = 0; k < n; ++k) {
      g.nodes[lane.first[k]].peer = lane.second[k];
      g.nodes[lane.second[k]].peer = lane.first[k];
    }
  }
  if (unmatched > 0)
    g.notes.push_back(fmt::format("{} transfer(s) had no matching send or receive in their step", unmatched));
}

// The node that ended last on `rank` at or before `limit`, other than `n` and its group.
int latestEndBefore(const Graph& g, int rank, int n, int64_t limit) {
  const auto& ends = g.by_end.at(rank);
  auto it = std::upper_bound(ends.begin(), ends.end(), std::make_pair(limit, INT32_MAX));
  while (it != ends.begin()) {
    --it;
    const int m = it->second;
    if (m != n && g.nodes[m].group != g.nodes[n].group && m < n) return m;
  }
  return -1;
}

std::vector<int> groupOf(const Graph& g, int n) {
  std::vector<int> out;
  const int group = g.nodes[n].group;
  for (int i = group; i < static_cast<int>(g.nodes.size()) && g.nodes[i].rank == g.nodes[n].rank; ++i) {
    if (g.nodes[i].group == group)
      out.push_back(i);
    else if (g.nodes[i].start != g.nodes[group].start)
      break;
  }
  return out;
}

// A group of transfers is named by its calls: "ncclSend+ncclRecv".
PathSegment segmentOf(const Graph& g, int node, int64_t from, int64_t to) {
  const Node& n = g.nodes[node];
  std::string name = n.op->name;
  if (n.op->cls == "p2p") {
    std::set<std::string> names;
    for (int m : groupOf(g, node)) names.insert(g.nodes[m].op->name);
    name.clear();
    for (const std::string& x : {std::string("ncclSend"), std::string("ncclRecv")})
      if (names.erase(x)) name += (name.empty() ? "" : "+") + x;
    for (const std::string& x : names) name += (name.empty() ? "" : "+") + x;
  }
  return PathSegment{n.rank, n.op->stream, n.op->cls, name, from, to, 1};
}

PathSegment hostSegment(const Node& waiting, int64_t from, int64_t to, int64_t launch_gap_ns) {
  // Issued after the GPU ran dry: the host was late. Else the GPU waited on another stream.
  const bool late = waiting.issue > from + launch_gap_ns;
  return PathSegment{waiting.rank, "", "host", late ? "launch" : "wait", from, to, 1};
}

// Consecutive segments of the same rank, kind and op with no gap between them are one.
std::vector<PathSegment> merged(std::vector<PathSegment> in, int64_t launch_gap_ns) {
  std::vector<PathSegment> out;
  for (PathSegment& s : in) {
    if (s.end_ns <= s.start_ns) continue;
    if (!out.empty()) {
      PathSegment& b = out.back();
      if (b.rank == s.rank && b.kind == s.kind && b.op == s.op && b.stream == s.stream &&
          s.start_ns - b.end_ns <= launch_gap_ns) {
        b.end_ns = s.end_ns;
        b.ops += s.ops;
        continue;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Graph build(const std::map<int, RankTimeline>& ranks) {
  Graph g;
  for (const auto& [rank, rt] : ranks)
    if (rt.timeline) addRankNodes(g, rank, *rt.timeline);
  addSteps(g, ranks);
  joinCollectives(g);
  matchTransfers(g);
  return g;
}

std::vector<int> partners(const Graph& g, int n) {
  std::vector<int> out;
  const Node& x = g.nodes[n];
  if (x.collective >= 0) {
    for (int m : g.collectives[x.collective])
      if (m != n) out.push_back(m);
  } else if (x.op->cls == "p2p") {
    for (int m : groupOf(g, n))
      if (g.nodes[m].peer >= 0) out.push_back(g.nodes[m].peer);
  }
  return out;
}

int predecessor(const Graph& g, int n, int64_t launch_gap_ns) {
  const Node& x = g.nodes[n];
  const int p = x.stream_prev;
  const bool host_bound = x.issue > 0 && (p < 0 || x.issue > g.nodes[p].end + launch_gap_ns);
  if (!host_bound && p >= 0 && x.start - g.nodes[p].end <= launch_gap_ns) return p;
  // Late host (it waited for what ended last before it issued), or a wait on another stream.
  const int other = latestEndBefore(g, x.rank, n, host_bound ? x.issue : x.start + launch_gap_ns);
  return other >= 0 ? other : p;
}

std::vector<PathSegment> walk(const Graph& g, const Step& s, int64_t launch_gap_ns) {
  int cur = -1;
  for (const auto& [rank, node] : s.closing)
    if (cur < 0 || g.nodes[node].end > g.nodes[cur].end) cur = node;
  std::vector<PathSegment> path;  // newest first
  if (cur < 0) return path;
  const int step = g.nodes[cur].step;
  int64_t t = g.nodes[cur].end;
  for (size_t guard = 0; guard < g.nodes.size() * 2 + 8; ++guard) {
    const Node& x = g.nodes[cur];
    int last = -1;
    for (int p : partners(g, cur))
      if (g.nodes[p].step == step && (last < 0 || g.nodes[p].start > g.nodes[last].start)) last = p;
    if (last >= 0 && g.nodes[last].start > x.start && g.nodes[last].start < t) {
      // Its end waited for the last member to arrive: the path goes on from there.
      path.push_back(segmentOf(g, cur, g.nodes[last].start, t));
      cur = last;
      t = g.nodes[last].start;
      continue;
    }
    path.push_back(segmentOf(g, cur, x.start, t));
    t = std::min(t, x.start);
    const int p = predecessor(g, cur, launch_gap_ns);
    if (p < 0 || g.nodes[p].step != step) {
      const int64_t from = p >= 0 ? std::max(g.nodes[p].end, s.rank_start.at(x.rank)) : s.rank_start.at(x.rank);
      if (t - from > launch_gap_ns) path.push_back(hostSegment(x, from, t, launch_gap_ns));
      break;
    }
    if (t - g.nodes[p].end > launch_gap_ns) path.push_back(hostSegment(x, g.nodes[p].end, t, launch_gap_ns));
    cur = p;
    t = std::min(t, g.nodes[p].end);
  }
  std::reverse(path.begin(), path.end());
  return merged(std::move(path), launch_gap_ns);
}

std::vector<int64_t> latestEnds(const Graph& g, int step, int64_t launch_gap_ns) {
  const Step& s = g.steps[step];
  std::vector<int> order = s.nodes;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tie(g.nodes[a].start, g.nodes[a].end) > std::tie(g.nodes[b].start, g.nodes[b].end);
  });
  std::vector<int64_t> latest(s.nodes.size(), s.end), own(s.nodes.size());
  std::vector<std::vector<int>> waiting(s.nodes.size());  // per node: the nodes whose end waits for its start
  for (int n : s.nodes) {
    int64_t arrival = g.nodes[n].start;
    for (int p : partners(g, n))
      if (g.nodes[p].step == step) {
        arrival = std::max(arrival, g.nodes[p].start);
        for (int m : groupOf(g, p)) waiting[g.nodes[n].local].push_back(m);
      }
    own[g.nodes[n].local] = g.nodes[n].end - arrival;
  }
  for (int n : order) {
    const Node& x = g.nodes[n];
    // The latest it could have started: its own work, and every member waiting for it.
    int64_t latest_start = latest[x.local] - own[x.local];
    for (int m : waiting[x.local])
      latest_start = std::min(latest_start, latest[g.nodes[m].local] - own[g.nodes[m].local]);
    const int pred = predecessor(g, n, launch_gap_ns);
    if (pred < 0 || g.nodes[pred].step != step) continue;
    const int64_t fixed = x.start - g.nodes[pred].end;  // launch latency or host time after it
    int64_t& p = latest[g.nodes[pred].local];
    p = std::min(p, latest_start - std::max<int64_t>(fixed, 0));
    if (x.stream_prev >= 0 && x.stream_prev != pred && g.nodes[x.stream_prev].step == step) {
      int64_t& q = latest[g.nodes[x.stream_prev].local];
      q = std::min(q, latest_start);
    }
  }
  return latest;
}

}  // namespace hangwatch::slowdown::step_graph
