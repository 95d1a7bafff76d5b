#include "hangwatch/slowdown/critical_path.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "hangwatch/slowdown/robust_stats.h"
#include "step_graph.h"

namespace hangwatch::slowdown {
namespace {

using RankKind = std::pair<int, std::string>;

bool isComputeKind(const std::string& kind) { return kind == "gemm" || kind == "kernel" || kind == "memcpy"; }

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// What one step shows beyond its path: each rank's busy time and largest slack per kind.
struct StepFacts {
  std::map<RankKind, int64_t> busy_ns;
  std::map<RankKind, int64_t> max_slack_ns;
  std::map<RankKind, int64_t> path_ns;
  std::map<RankKind, std::map<std::string, int64_t>> path_ops;  // op names on the path
};

StepPath stepPath(const step_graph::Graph& g, int si, const CriticalPathThresholds& t, StepFacts& facts,
                  std::map<int, std::vector<int64_t>>& op_slack) {
  const step_graph::Step& s = g.steps[si];
  StepPath p;
  p.id = s.id;
  p.start_ns = s.start;
  p.end_ns = s.end;
  p.segments = step_graph::walk(g, s, t.launch_gap_ns);
  for (const PathSegment& seg : p.segments) {
    const int64_t d = seg.end_ns - seg.start_ns;
    p.rank_ns[seg.rank] += d;
    p.kind_ns[seg.kind] += d;
    facts.path_ns[{seg.rank, seg.kind}] += d;
    facts.path_ops[{seg.rank, seg.kind}][seg.op] += d;
  }
  const std::vector<int64_t> latest = step_graph::latestEnds(g, si, t.launch_gap_ns);
  for (int n : s.nodes) {
    const step_graph::Node& node = g.nodes[n];
    const int64_t slack = std::max<int64_t>(latest[node.local] - node.end, 0);
    std::vector<int64_t>& by_op = op_slack[node.rank];
    const auto index = static_cast<size_t>(node.op - g.first_op.at(node.rank));
    if (index < by_op.size()) by_op[index] = slack;
    auto [it, fresh] = p.rank_min_slack_ns.try_emplace(node.rank, slack);
    if (!fresh) it->second = std::min(it->second, slack);
    const RankKind key{node.rank, node.op->cls};
    if (isComputeKind(node.op->cls)) facts.busy_ns[key] += node.end - node.start;
    facts.max_slack_ns[key] = std::max(facts.max_slack_ns[key], slack);
  }
  return p;
}

std::string busiestOp(const std::map<std::string, int64_t>& ops) {
  std::string best;
  int64_t most = -1;
  for (const auto& [name, ns] : ops)
    if (ns > most) most = ns, best = name;
  return best;
}

int64_t medianNs(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A rank's usual time on the path (or busy) for one kind: the median over the baseline steps.
int64_t usual(const std::vector<StepFacts>& facts, const std::vector<size_t>& steps,
              std::map<RankKind, int64_t> StepFacts::*field, const RankKind& key) {
  std::vector<int64_t> v;
  for (size_t i : steps) {
    auto it = (facts[i].*field).find(key);
    v.push_back(it == (facts[i].*field).end() ? 0 : it->second);
  }
  return medianNs(v);
}

struct StepSplit {
  std::vector<size_t> normal, slow;
  RobustSpread spread;
};

// The usual value of a series that may hold a slowdown from some step on: the median and
// spread of its faster half, so that a slowdown in up to half the steps (and more) does not
// move the bar it is measured against.
RobustSpread usualOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  values.resize((values.size() + 1) / 2);
  return robustSpread(values, 0.0);
}

StepSplit splitSteps(const std::vector<StepPath>& steps, const CriticalPathThresholds& t) {
  std::vector<double> d;
  for (const StepPath& s : steps) d.push_back(s.ms());
  StepSplit b;
  b.spread = usualOf(d);
  const double bar =
      b.spread.median + std::max(t.slow_step_z * b.spread.scale, (t.slow_step_ratio - 1) * b.spread.median);
  for (size_t i = 0; i < steps.size(); ++i) (d[i] >= bar ? b.slow : b.normal).push_back(i);
  return b;
}

// How much more than usual counts as grown: the rank's own spread, at least a share of its
// usual time and a floor.
double grownBar(const RobustSpread& usual, const CriticalPathThresholds& t) {
  return std::max({t.absorbed_min_ms * 1e6, (t.absorbed_ratio - 1) * usual.median, t.slow_step_z * usual.scale});
}

std::string placeOf(int rank, const std::optional<int>& stage) {
  return stage ? fmt::format("rank {} (pipeline stage {})", rank, *stage) : fmt::format("rank {}", rank);
}

// Where a slowdown is looked for: pipeline stages when every rank has one (the ranks of a
// stage are interchangeable on the path: data-parallel replicas and tensor-parallel peers
// tie, and the path takes either), else each rank.
struct Units {
  std::map<int, int> of_rank;
  std::map<int, std::vector<int>> ranks;
  bool by_stage = false;
};

Units unitsOf(const std::map<int, RankTimeline>& ranks) {
  Units u;
  u.by_stage = !ranks.empty();
  for (const auto& [rank, rt] : ranks) u.by_stage = u.by_stage && rt.stage.has_value();
  for (const auto& [rank, rt] : ranks) {
    const int unit = u.by_stage ? *rt.stage : rank;
    u.of_rank[rank] = unit;
    u.ranks[unit].push_back(rank);
  }
  return u;
}

bool ownWork(const std::string& kind) { return isComputeKind(kind) || kind == "host"; }

// A unit's time on the path per kind of its own work in one step. A transfer or collective
// that took longer once every member had arrived is its link's or network's doing.
std::map<std::string, int64_t> ownPath(const StepFacts& f, const Units& u, int unit) {
  std::map<std::string, int64_t> out;
  for (const auto& [key, ns] : f.path_ns)
    if (ownWork(key.second) && u.of_rank.at(key.first) == unit) out[key.second] += ns;
  return out;
}

struct UnitGrowth {
  int unit = -1;
  std::string kind;  // the kind that grew most
  int64_t extra = 0;
};

// The unit whose own work on the path grew most in one slow step, against the normal steps,
// and by no more than the own work on the path grew in all.
UnitGrowth mostGrown(const std::vector<StepFacts>& facts, const Units& u, const std::vector<size_t>& normal,
                     size_t step) {
  UnitGrowth best;
  for (const auto& [unit, members] : u.ranks) {
    std::map<std::string, std::vector<int64_t>> usual_by_kind;
    for (size_t i : normal) {
      std::map<std::string, int64_t> own = ownPath(facts[i], u, unit);
      for (const std::string k : {"gemm", "kernel", "memcpy", "host"}) usual_by_kind[k].push_back(own[k]);
    }
    const std::map<std::string, int64_t> now = ownPath(facts[step], u, unit);
    UnitGrowth g{unit, "", 0};
    int64_t top = INT64_MIN;
    for (auto& [k, v] : usual_by_kind) {
      auto it = now.find(k);
      const int64_t extra = (it == now.end() ? 0 : it->second) - medianNs(v);
      g.extra += extra;
      if (extra > top) top = extra, g.kind = k;
    }
    if (best.unit < 0 || g.extra > best.extra) best = g;
  }
  // Tied stages trade places on the path from step to step: one's growth is another's loss.
  // Only what the own work on the path grew by in all counts.
  const auto total = [&](size_t i) {
    int64_t sum = 0;
    for (const auto& [key, ns] : facts[i].path_ns)
      if (ownWork(key.second)) sum += ns;
    return sum;
  };
  std::vector<int64_t> usual_totals;
  for (size_t i : normal) usual_totals.push_back(total(i));
  best.extra = std::min(best.extra, total(step) - medianNs(usual_totals));
  return best;
}

// Each rank's busy time per step of one kind, less its usual: what grew, and by how much.
struct Growth {
  std::vector<int64_t> extra;  // per step
  double bar = 0;
};

std::map<RankKind, Growth> busyGrowth(const std::vector<StepFacts>& facts, const CriticalPathThresholds& t) {
  std::set<RankKind> keys;
  for (const StepFacts& f : facts)
    for (const auto& [key, ns] : f.busy_ns) keys.insert(key);
  std::map<RankKind, Growth> out;
  for (const RankKind& key : keys) {
    std::vector<double> values;
    for (const StepFacts& f : facts) {
      auto it = f.busy_ns.find(key);
      values.push_back(it == f.busy_ns.end() ? 0.0 : static_cast<double>(it->second));
    }
    const RobustSpread usual = usualOf(values);
    Growth& g = out[key];
    g.bar = grownBar(usual, t);
    for (double v : values) g.extra.push_back(static_cast<int64_t>(v - usual.median));
  }
  // What the other ranks' work grew by in the same step (a loaded host slows them all) is not
  // this rank's own.
  for (size_t i = 0; i < facts.size(); ++i) {
    std::map<RankKind, int64_t> common;
    for (const auto& [key, g] : out) {
      std::vector<double> others;
      for (const auto& [other, h] : out)
        if (other.second == key.second && other.first != key.first) others.push_back(static_cast<double>(h.extra[i]));
      common[key] = static_cast<int64_t>(std::max(0.0, median(others)));
    }
    for (auto& [key, g] : out) g.extra[i] -= common[key];
  }
  return out;
}

// Which rank of a slow unit did it: the one whose own work of that kind grew (busy time, which
// does not depend on which tied rank the path took) in most of the slow steps; for host
// time, the one whose host time on the path grew most. -1 when none stands out.
int slowRank(const std::vector<StepFacts>& facts, const Units& u, int unit, const std::string& kind,
             const std::vector<size_t>& hits, const std::vector<size_t>& normal,
             const std::map<RankKind, Growth>& growth) {
  const std::vector<int>& members = u.ranks.at(unit);
  if (members.size() == 1) return members.front();
  int best = -1;
  double most = 0;
  for (int r : members) {
    std::vector<double> extra;
    if (kind == "host") {
      const int64_t usual_ns = usual(facts, normal, &StepFacts::path_ns, {r, "host"});
      for (size_t i : hits) {
        auto it = facts[i].path_ns.find({r, "host"});
        extra.push_back(static_cast<double>((it == facts[i].path_ns.end() ? 0 : it->second) - usual_ns));
      }
    } else if (auto g = growth.find({r, kind}); g != growth.end()) {
      for (size_t i : hits)
        if (static_cast<double>(g->second.extra[i]) >= g->second.bar)
          extra.push_back(static_cast<double>(g->second.extra[i]));
      if (2 * extra.size() < hits.size()) continue;
    }
    const double m = median(extra);
    if (m > most) most = m, best = r;
  }
  return best;
}

void findCauses(CriticalPathAnalysis& a, const std::vector<StepFacts>& facts, const StepSplit& b, const Units& u,
                const std::map<RankKind, Growth>& growth, const CriticalPathThresholds& t) {
  std::map<int, std::vector<std::pair<size_t, UnitGrowth>>> by_unit;
  for (size_t i : b.slow) {
    const UnitGrowth g = mostGrown(facts, u, b.normal, i);
    const double step_extra = a.steps[i].ms() - b.spread.median;
    if (g.unit >= 0 && ms(g.extra) >= t.cause_share * step_extra) by_unit[g.unit].push_back({i, g});
  }
  size_t explained = 0;
  for (const auto& [unit, hits] : by_unit) {
    if (hits.size() < t.min_slow_steps || 2 * hits.size() < b.slow.size()) continue;
    SlowStepCause cause;
    std::map<std::string, int> kinds;
    std::vector<size_t> steps;
    std::vector<double> step_ms, extra_ms;
    for (const auto& [i, g] : hits) {
      steps.push_back(i);
      cause.steps.push_back(a.steps[i].id);
      ++kinds[g.kind];
      step_ms.push_back(a.steps[i].ms());
      extra_ms.push_back(ms(g.extra));
    }
    cause.kind =
        std::max_element(kinds.begin(), kinds.end(), [](auto& x, auto& y) { return x.second < y.second; })->first;
    cause.ranks = u.ranks.at(unit);
    cause.rank = slowRank(facts, u, unit, cause.kind, steps, b.normal, growth);
    if (u.by_stage) cause.stage = unit;
    std::map<std::string, int64_t> ops;
    for (int r : cause.rank >= 0 ? std::vector<int>{cause.rank} : cause.ranks)
      if (auto it = facts[steps.back()].path_ops.find({r, cause.kind}); it != facts[steps.back()].path_ops.end())
        for (const auto& [name, ns] : it->second) ops[name] += ns;
    cause.op = busiestOp(ops);
    cause.step_ms = median(step_ms);
    cause.baseline_ms = b.spread.median;
    cause.extra_path_ms = median(extra_ms);
    explained += hits.size();
    a.causes.push_back(std::move(cause));
  }
  if (b.slow.size() > explained)
    a.notes.push_back(
        fmt::format("{} slow step(s) without a cause that holds in {} or more and half of them: noise or "
                    "one-off pauses",
                    b.slow.size() - explained, t.min_slow_steps));
}

void findAbsorbed(CriticalPathAnalysis& a, const std::vector<StepFacts>& facts, const StepSplit& b,
                  const std::map<int, RankTimeline>& ranks, const std::map<RankKind, Growth>& growths,
                  const CriticalPathThresholds& t) {
  std::set<int> causes;
  for (const SlowStepCause& c : a.causes) causes.insert(c.rank);
  for (const auto& [key, growth] : growths) {
    if (causes.count(key.first)) continue;
    AbsorbedSlowdown s;
    std::vector<double> extra, slack;
    std::vector<uint64_t> grown;
    const std::set<size_t> slow(b.slow.begin(), b.slow.end());
    const int64_t usual_on_path = usual(facts, b.normal, &StepFacts::path_ns, key);
    for (size_t i = 0; i < facts.size(); ++i) {
      const int64_t grew = growth.extra[i];
      if (static_cast<double>(grew) < growth.bar) continue;
      grown.push_back(a.steps[i].id);
      // Its work grew and the step did not: the schedule had room for it. A step slow for
      // another reason (a loaded host slows some rank now and then) shows the same when this
      // rank's own time of that kind on the critical path did not grow by half as much: the
      // growth stayed off the path. Where it did grow there (its own growth, its host's load,
      // or the path moving to it from a tied rank), the step shows nothing either way.
      if (slow.count(i)) {
        const auto on_path = facts[i].path_ns.find(key);
        const int64_t path_grew = (on_path == facts[i].path_ns.end() ? 0 : on_path->second) - usual_on_path;
        if (2 * path_grew >= grew) continue;
      }
      s.steps.push_back(a.steps[i].id);
      extra.push_back(ms(grew));
      slack.push_back(ms(facts[i].max_slack_ns.at(key)));
    }
    // A slowdown holds from its first step on, over a fair share of the window; growth scattered
    // among the steps, or in a few, is noise. Steps a loaded host made slow now and then do not
    // break it, but half or more of the steps it grew in must show that it fitted.
    const size_t span = grown.empty() ? 0 : static_cast<size_t>(grown.back() - grown.front()) + 1;
    if (grown.size() < t.min_slow_steps || 3 * grown.size() < 2 * span || 4 * grown.size() < facts.size() ||
        s.steps.size() < t.min_slow_steps || 2 * s.steps.size() < grown.size())
      continue;
    // Work added to a step is the same each step; a rank slowed by its host's load now and then
    // grows by a different amount every time.
    const RobustSpread spread = robustSpread(extra, 0.0);
    if (spread.scale > spread.median / 3) continue;
    s.rank = key.first;
    s.kind = key.second;
    if (auto it = ranks.find(s.rank); it != ranks.end()) s.stage = it->second.stage;
    s.extra_ms = median(extra);
    s.slack_ms = median(slack);
    a.absorbed.push_back(std::move(s));
  }
}

std::string causePlace(const SlowStepCause& c) {
  const std::string stage =
      c.stage ? fmt::format("pipeline stage {} (ranks {})", *c.stage, fmt::join(c.ranks, ",")) : "";
  if (c.rank < 0) return stage;
  return c.stage ? fmt::format("rank {} of {}", c.rank, stage) : fmt::format("rank {}", c.rank);
}

void explain(CriticalPathAnalysis& a) {
  for (SlowStepCause& c : a.causes) {
    c.evidence.push_back(fmt::format("{} of {} steps took {:.1f} ms against the job's usual {:.1f} ms (steps {})",
                                     c.steps.size(), a.steps.size(), c.step_ms, c.baseline_ms,
                                     fmt::join(c.steps, ",")));
    c.evidence.push_back(
        fmt::format("In those steps {}'s own {} work on the critical path grew by {:.1f} ms, the most "
                    "of any {}: it made them slow ({})",
                    causePlace(c), c.kind, c.extra_path_ms, c.stage ? "stage" : "rank", c.op));
    if (c.rank < 0)
      c.evidence.push_back("No one rank of the stage did more work than usual: the stage as a whole was slower");
  }
  for (AbsorbedSlowdown& s : a.absorbed)
    s.evidence.push_back(
        fmt::format("{}'s {} time grew by {:.1f} ms per step in {} step(s), off the critical path "
                    "(up to {:.1f} ms of slack): absorbed by the schedule, not a cause",
                    placeOf(s.rank, s.stage), s.kind, s.extra_ms, s.steps.size(), s.slack_ms));
}

nlohmann::json segmentJson(const PathSegment& s) {
  return {{"rank", s.rank}, {"stream", s.stream},     {"kind", s.kind},    {"op", s.op},
          {"ops", s.ops},   {"start_ns", s.start_ns}, {"end_ns", s.end_ns}};
}

nlohmann::json stageJson(const std::optional<int>& stage) { return stage ? nlohmann::json(*stage) : nlohmann::json(); }

}  // namespace

CriticalPathAnalysis analyzeCriticalPath(const std::map<int, RankTimeline>& ranks, const CriticalPathThresholds& t) {
  CriticalPathAnalysis a;
  const step_graph::Graph g = step_graph::build(ranks);
  a.notes = g.notes;
  for (const auto& [rank, rt] : ranks)
    if (rt.stage) a.stages[rank] = *rt.stage;
  std::vector<StepFacts> facts(g.steps.size());
  for (const auto& [rank, rt] : ranks)
    if (rt.timeline) a.op_slack_ns[rank].assign(rt.timeline->ops.size(), -1);
  for (size_t i = 0; i < g.steps.size(); ++i)
    a.steps.push_back(stepPath(g, static_cast<int>(i), t, facts[i], a.op_slack_ns));
  if (a.steps.empty()) {
    a.notes.push_back("no step closed on every rank with a timeline: no critical path");
    return a;
  }
  a.slowest_step =
      std::max_element(a.steps.begin(), a.steps.end(), [](auto& x, auto& y) { return x.ms() < y.ms(); })->id;
  const StepSplit b = splitSteps(a.steps, t);
  a.baseline_step_ms = b.spread.median;
  if (a.steps.size() < t.min_steps) {
    a.notes.push_back(fmt::format("{} common step(s): too few to tell a slow step from the usual", a.steps.size()));
    return a;
  }
  const Units units = unitsOf(ranks);
  const std::map<RankKind, Growth> growth = busyGrowth(facts, t);
  findCauses(a, facts, b, units, growth, t);
  findAbsorbed(a, facts, b, ranks, growth, t);
  explain(a);
  return a;
}

nlohmann::json toJson(const CriticalPathAnalysis& a) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepPath& s : a.steps) {
    nlohmann::json segs = nlohmann::json::array(), ranks = nlohmann::json::object(), kinds = nlohmann::json::object(),
                   slack = nlohmann::json::object();
    for (const PathSegment& seg : s.segments) segs.push_back(segmentJson(seg));
    for (const auto& [r, ns] : s.rank_ns) ranks[std::to_string(r)] = ms(ns);
    for (const auto& [k, ns] : s.kind_ns) kinds[k] = ms(ns);
    for (const auto& [r, ns] : s.rank_min_slack_ns) slack[std::to_string(r)] = ms(ns);
    steps.push_back({{"step", s.id},
                     {"start_ns", s.start_ns},
                     {"end_ns", s.end_ns},
                     {"ms", s.ms()},
                     {"segments", segs},
                     {"rank_ms", ranks},
                     {"kind_ms", kinds},
                     {"rank_min_slack_ms", slack}});
  }
  nlohmann::json causes = nlohmann::json::array(), absorbed = nlohmann::json::array();
  for (const SlowStepCause& c : a.causes)
    causes.push_back({{"rank", c.rank >= 0 ? nlohmann::json(c.rank) : nlohmann::json()},
                      {"stage", stageJson(c.stage)},
                      {"ranks", c.ranks},
                      {"kind", c.kind},
                      {"op", c.op},
                      {"steps", c.steps},
                      {"step_ms", c.step_ms},
                      {"baseline_ms", c.baseline_ms},
                      {"extra_path_ms", c.extra_path_ms},
                      {"evidence", c.evidence}});
  for (const AbsorbedSlowdown& s : a.absorbed)
    absorbed.push_back({{"rank", s.rank},
                        {"stage", stageJson(s.stage)},
                        {"kind", s.kind},
                        {"steps", s.steps},
                        {"extra_ms", s.extra_ms},
                        {"slack_ms", s.slack_ms},
                        {"evidence", s.evidence}});
  return {{"steps", steps},
          {"baseline_step_ms", a.baseline_step_ms},
          {"slowest_step", a.slowest_step ? nlohmann::json(*a.slowest_step) : nlohmann::json()},
          {"causes", causes},
          {"absorbed", absorbed},
          {"notes", a.notes}};
}

}  // namespace hangwatch::slowdown
