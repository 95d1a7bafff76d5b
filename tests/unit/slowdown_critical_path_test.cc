// The critical path of a pipeline step (analyzer/slowdown/critical_path.h), on 1F1B schedules
// whose op times are known, and what a slower op on and off the path is reported as.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../../analyzer/slowdown/step_graph.h"
#include "hangwatch/slowdown/critical_path.h"

using namespace hangwatch;
using namespace hangwatch::slowdown;

namespace {

constexpr int64_t kPathMs = 1'000'000;

// One op of a stage's schedule: compute, or a group of transfers ("send a1", "recv g0").
struct PlannedOp {
  std::string name;  // fwd | bwd | opt | xfer
  double ms = 0;     // compute time, or the transfer time once every peer has posted
  std::vector<std::string> sends, receives;
};

// The non-interleaved 1F1B schedule of two stages, with Megatron's grouped transfers.
std::vector<PlannedOp> twoStageSchedule(int stage, int microbatches, double f, double b, double t) {
  const auto mb = [](char kind, int i) { return std::string(1, kind) + std::to_string(i); };
  std::vector<PlannedOp> ops;
  if (stage == 0) {
    ops.push_back({"fwd", f, {}, {}});
    ops.push_back({"xfer", t, {mb('a', 0)}, {}});
    for (int i = 0; i + 1 < microbatches; ++i) {
      ops.push_back({"fwd", f, {}, {}});
      ops.push_back({"xfer", t, {mb('a', i + 1)}, {mb('g', i)}});
      ops.push_back({"bwd", b, {}, {}});
    }
    ops.push_back({"xfer", t, {}, {mb('g', microbatches - 1)}});
    ops.push_back({"bwd", b, {}, {}});
  } else {
    ops.push_back({"xfer", t, {}, {mb('a', 0)}});
    for (int i = 0; i < microbatches; ++i) {
      ops.push_back({"fwd", f, {}, {}});
      ops.push_back({"bwd", b, {}, {}});
      if (i + 1 < microbatches)
        ops.push_back({"xfer", t, {mb('g', i)}, {mb('a', i + 1)}});
      else
        ops.push_back({"xfer", t, {mb('g', i)}, {}});
    }
  }
  return ops;
}

// Runs both stages' op lists as a GPU would (one stream each, a group of transfers starting
// once every peer posted its side) from `t0`, appending the ops to each rank's timeline.
// Returns each rank's end.
std::vector<int64_t> runStages(std::vector<TimelineWindow>& w, const std::vector<std::vector<PlannedOp>>& plans,
                               int64_t t0) {
  const size_t n = plans.size();
  std::vector<size_t> next(n, 0);
  std::vector<int64_t> free_at(n, t0);
  std::map<std::string, int64_t> decided;  // transfer tag -> when its group started moving data
  const auto holds = [](const PlannedOp& op, const std::string& tag) {
    for (const auto& tags : {op.sends, op.receives})
      if (std::find(tags.begin(), tags.end(), tag) != tags.end()) return true;
    return false;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < n; ++r) {
      if (next[r] >= plans[r].size()) continue;
      const PlannedOp& op = plans[r][next[r]];
      int64_t go = free_at[r];
      bool ready = true;
      for (const auto& tags : {op.sends, op.receives})
        for (const std::string& tag : tags) {
          if (auto d = decided.find(tag); d != decided.end()) {
            go = std::max(go, d->second);
            continue;
          }
          bool posted = false;  // the peer's stream has reached the group holding the other side
          for (size_t p = 0; p < n; ++p)
            if (p != r && next[p] < plans[p].size() && holds(plans[p][next[p]], tag)) {
              posted = true;
              go = std::max(go, free_at[p]);
            }
          ready = ready && posted;
        }
      if (!ready) continue;
      for (const auto& tags : {op.sends, op.receives})
        for (const std::string& tag : tags) decided.try_emplace(tag, go);
      const int64_t start = free_at[r];
      const int64_t end = go + std::llround(op.ms * kPathMs);
      if (op.name == "xfer") {
        for (const auto& [tags, api] : {std::pair{op.sends, "ncclSend"}, std::pair{op.receives, "ncclRecv"}})
          for (size_t k = 0; k < tags.size(); ++k)
            w[r].ops.push_back({"p2p", api, "0xs", "0xpp", static_cast<int>(r), 2, 1 - static_cast<int>(r), 0, 4096, 0,
                                "", start, start, end});
      } else {
        w[r].ops.push_back({"gemm", op.name, "0xs", "", -1, 0, -1, 0, 0, 1e9, "64x64x64", start, start, end});
      }
      free_at[r] = end;
      ++next[r];
      moved = true;
    }
  }
  return free_at;
}

// Two ranks, one per stage, `steps` steps of 1F1B after a marker step; `plan(step, stage)`.
template <typename Plan>
std::map<int, TimelineWindow> pipelineJob(int steps, Plan plan, std::map<int, RankTimeline>& ranks) {
  std::vector<TimelineWindow> w(2);
  int64_t t = 5 * kPathMs;
  for (int r = 0; r < 2; ++r) {
    w[r].rank = r;
    w[r].ops.push_back({"gemm", "marker", "0xs", "", -1, 0, -1, 0, 0, 0, "", t, t, t + 4 * kPathMs});
  }
  t += 4 * kPathMs;
  std::vector<std::vector<int64_t>> ends(2, std::vector<int64_t>{t});
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> e = runStages(w, {plan(s, 0), plan(s, 1)}, t + kPathMs);
    for (int r = 0; r < 2; ++r) ends[r].push_back(e[r]);
    t = std::max(e[0], e[1]);
  }
  std::map<int, TimelineWindow> out;
  for (int r = 0; r < 2; ++r) out[r] = w[r];
  for (auto& [r, tw] : out) {
    RankTimeline& rt = ranks[r];
    rt.timeline = &tw;
    rt.stage = r;
    for (size_t i = 0; i < ends[r].size(); ++i) rt.step_ends.push_back({i, ends[r][i]});
  }
  return out;
}

}  // namespace

TEST_CASE("TheCriticalPathOfTwoStagesAndFourMicrobatchesRunsThroughTheLastStageDuringTheBubble") {
  std::map<int, RankTimeline> ranks;
  auto timelines = pipelineJob(
      1, [](int, int stage) { return twoStageSchedule(stage, 4, 2, 4, 1); }, ranks);
  for (auto& [r, rt] : ranks) rt.timeline = &timelines.at(r);
  const CriticalPathAnalysis a = analyzeCriticalPath(ranks);
  REQUIRE(a.steps.size() == 1);
  const StepPath& s = a.steps[0];
  // By hand: stage 0 starts at 10 ms (1 ms after the step began: its host issued it), F0 2,
  // a0 1, then stage 1 holds the path for F0 B0 g0 F1 B1 g1 F2 B2 g2 F3 B3 (4 x 6 + 3 x 1),
  // g3 reaches stage 0 1 ms later and its B3 ends the step: 36 ms.
  CHECK(s.ms() == Approx(36));
  std::vector<std::string> got;
  for (const PathSegment& seg : s.segments)
    got.push_back(std::to_string(seg.rank) + ":" + seg.op + ":" +
                  std::to_string((seg.end_ns - seg.start_ns) / kPathMs));
  const std::vector<std::string> want = {
      "0:launch:1", "0:fwd:2", "1:ncclRecv:1",          "1:fwd:2", "1:bwd:4", "1:ncclSend+ncclRecv:1",
      "1:fwd:2",    "1:bwd:4", "1:ncclSend+ncclRecv:1", "1:fwd:2", "1:bwd:4", "1:ncclSend+ncclRecv:1",
      "1:fwd:2",    "1:bwd:4", "0:ncclRecv:1",          "0:bwd:4"};
  CHECK(got == want);
  CHECK(s.rank_ns.at(0) == 8 * kPathMs);
  CHECK(s.rank_ns.at(1) == 28 * kPathMs);
  CHECK(s.kind_ns.at("gemm") == 30 * kPathMs);
  CHECK(s.kind_ns.at("p2p") == 5 * kPathMs);
  CHECK(s.kind_ns.at("host") == 1 * kPathMs);
  // Stage 0 waits 5 -> 9 ms (its bubble) inside its group: none of that is on the path, and
  // its F1 (3 -> 5 ms) could have ended 4 ms later without the step ending later.
  const step_graph::Graph g = step_graph::build(ranks);
  const auto latest = step_graph::latestEnds(g, 0, 50'000);
  int f1 = -1;
  for (int i = g.rank_nodes.at(0).first, seen = 0; i < g.rank_nodes.at(0).second; ++i)
    if (g.nodes[i].op->name == "fwd" && ++seen == 2) f1 = i;
  REQUIRE(f1 >= 0);
  CHECK(latest[g.nodes[f1].local] - g.nodes[f1].end == 4 * kPathMs);
  CHECK(s.rank_min_slack_ns.at(0) == 0);
}

TEST_CASE("ASlowerBackwardOnTheLastStageIsTheCauseOfTheSlowSteps") {
  std::map<int, RankTimeline> ranks;
  auto timelines = pipelineJob(
      10, [](int step, int stage) { return twoStageSchedule(stage, 4, 2, stage == 1 && step >= 7 ? 6 : 4, 1); }, ranks);
  const CriticalPathAnalysis a = analyzeCriticalPath(ranks);
  REQUIRE(a.steps.size() == 10);
  REQUIRE(a.causes.size() == 1);
  CHECK(a.causes[0].rank == 1);
  CHECK(a.causes[0].stage == 1);
  CHECK(a.causes[0].kind == "gemm");
  CHECK(a.causes[0].op == "bwd");
  CHECK(a.causes[0].steps == std::vector<uint64_t>{8, 9, 10});
  CHECK(a.causes[0].extra_path_ms == Approx(8));  // 4 backwards x 2 ms on the path
  CHECK(a.absorbed.empty());
}

TEST_CASE("ALongerOptimizerStepOnTheLastStageFitsInItsSlackAndIsAbsorbed") {
  std::map<int, RankTimeline> ranks;
  // The last stage ends its step 4 ms before the first: a 3 ms optimizer step fits there.
  auto timelines = pipelineJob(
      10,
      [](int step, int stage) {
        auto ops = twoStageSchedule(stage, 4, 2, 4, 1);
        if (stage == 1 && step >= 7) ops.push_back({"opt", 3, {}, {}});
        return ops;
      },
      ranks);
  const CriticalPathAnalysis a = analyzeCriticalPath(ranks);
  CHECK(a.causes.empty());
  REQUIRE(a.absorbed.size() == 1);
  CHECK(a.absorbed[0].rank == 1);
  CHECK(a.absorbed[0].extra_ms == Approx(3));
  CHECK(a.absorbed[0].steps == std::vector<uint64_t>{8, 9, 10});
}

// 16 steps of the two stages, the last stage's 3 ms optimizer step from step 11 on (its slack
// holds it), and each stage's forwards 1 ms longer in the steps a loaded host slowed for it,
// its transfers 1 ms longer in those its link slowed.
CriticalPathAnalysis optimizerStepOnALoadedHost(const std::set<int>& loaded_stage0, const std::set<int>& loaded_stage1,
                                                const std::set<int>& slow_link_stage0 = {},
                                                const std::set<int>& slow_link_stage1 = {}) {
  std::map<int, RankTimeline> ranks;
  auto timelines = pipelineJob(
      16,
      [&](int step, int stage) {
        const bool loaded = (stage == 0 ? loaded_stage0 : loaded_stage1).count(step + 1) > 0;
        const bool slow_link = (stage == 0 ? slow_link_stage0 : slow_link_stage1).count(step + 1) > 0;
        auto ops = twoStageSchedule(stage, 4, loaded ? 3 : 2, 4, slow_link ? 2 : 1);
        if (stage == 1 && step >= 10) ops.push_back({"opt", 3, {}, {}});
        return ops;
      },
      ranks);
  return analyzeCriticalPath(ranks);
}

// Those slow steps say nothing about whether the optimizer step fitted; the others still show
// that it did.
TEST_CASE("AnAbsorbedSlowdownStaysAbsorbedWhenHalfItsStepsAreSlowForOtherReasons") {
  const CriticalPathAnalysis a = optimizerStepOnALoadedHost({12, 15}, {14});
  CHECK(a.causes.empty());
  REQUIRE(a.absorbed.size() == 1);
  CHECK(a.absorbed[0].rank == 1);
  CHECK(a.absorbed[0].extra_ms == Approx(3));
  CHECK(a.absorbed[0].steps == std::vector<uint64_t>{11, 13, 16});
}

// Most of the steps it grew in were slow, from transfers that took longer now on one stage, now
// on the other (no cause holds in enough of them): the last stage's own compute time on the
// critical path did not grow in those steps, so they show that its growth fitted too.
TEST_CASE("AnAbsorbedSlowdownStaysAbsorbedWhenMostOfItsStepsAreSlowOffItsOwnPath") {
  const CriticalPathAnalysis a = optimizerStepOnALoadedHost({}, {}, {12, 14}, {13, 16});
  CHECK(a.causes.empty());
  REQUIRE(a.absorbed.size() == 1);
  CHECK(a.absorbed[0].rank == 1);
  CHECK(a.absorbed[0].extra_ms == Approx(3));
  CHECK(a.absorbed[0].steps == std::vector<uint64_t>{11, 12, 13, 14, 15, 16});
}

// When most of the steps the rank grew in were slow on its own part of the critical path (its
// host's load on the same stage, steps 13 and 16), or its growth is lost in the other stage's
// (12 and 14), those steps cannot show that the growth fitted: nothing is reported as absorbed.
TEST_CASE("GrowthWhoseStepsWereMostlySlowIsNotReportedAsAbsorbed") {
  const CriticalPathAnalysis a = optimizerStepOnALoadedHost({12, 14}, {13, 16});
  CHECK(a.causes.empty());
  CHECK(a.absorbed.empty());
}

TEST_CASE("TheSameOptimizerStepOnTheFirstStageMakesTheStepsSlow") {
  std::map<int, RankTimeline> ranks;
  auto timelines = pipelineJob(
      10,
      [](int step, int stage) {
        auto ops = twoStageSchedule(stage, 4, 2, 4, 1);
        if (stage == 0 && step >= 7) ops.push_back({"opt", 12, {}, {}});
        return ops;
      },
      ranks);
  const CriticalPathAnalysis a = analyzeCriticalPath(ranks);
  REQUIRE(a.causes.size() == 1);
  CHECK(a.causes[0].rank == 0);
  CHECK(a.causes[0].op == "opt");
  CHECK(a.absorbed.empty());
}

// Backwards 0-5 % apart from step to step.
TEST_CASE("StepsThatDifferOnlyByNoiseNameNoCause") {
  std::map<int, RankTimeline> ranks;
  auto timelines = pipelineJob(
      12, [](int step, int stage) { return twoStageSchedule(stage, 4, 2, 4 + 0.1 * ((step * 7 + stage) % 3), 1); },
      ranks);
  const CriticalPathAnalysis a = analyzeCriticalPath(ranks);
  CHECK(a.causes.empty());
  CHECK(a.absorbed.empty());
}
