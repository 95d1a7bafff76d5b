#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/slowdown/robust_stats.h"
#include "hangwatch/slowdown/slowdown_analyzer.h"

using namespace hangwatch;
using namespace hangwatch::slowdown;

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;

// A healthy rank of a 4-rank data-parallel job: two GEMM shapes, one AllReduce on
// communicator "0xw", ~12 ms issue latency, 12% idle between steps.
RankProfile healthyRank(int rank, double jitter = 0) {
  RankProfile p;
  p.rank = rank;
  p.host = "host" + std::to_string(rank / 2);
  p.windows = 10;
  p.window_ns = 10 * kSecond;
  const double tflops = 0.002 * (1 + jitter);
  p.gemms["256x32x256"] = {tflops * 1e3 * 4000 * kMs, 4000 * kMs, 800};
  p.gemms["256x256x32"] = {tflops * 1e3 * 2000 * kMs, 2000 * kMs, 400};
  CollectiveTotals c;
  c.comm = "0xw";
  c.name = "ncclAllReduce";
  c.bytes = 4 << 20;
  c.comm_size = 4;
  c.comm_rank = rank;
  c.count = 100;
  c.ns = 100 * 15 * kMs;
  p.collectives["ncclAllReduce 0xw 4194304"] = c;
  for (int i = 0; i < 1000; ++i) p.issue_latency.add(static_cast<int64_t>((2 + i % 20) * kMs * (1 + jitter)));
  p.busy_ns = static_cast<int64_t>(8.4 * kSecond);
  p.void_ns = static_cast<int64_t>((1.6 + jitter) * kSecond);
  p.inter_step_void_ns = static_cast<int64_t>((1.2 + jitter) * kSecond);
  p.sync_count = 100;
  p.sync_ns = 3 * kSecond;
  p.steps = 100;
  p.step_ns = 10 * kSecond;
  p.step_p50_ns = {100.0 * kMs};
  return p;
}

std::vector<RankProfile> healthyJob(int n = 4) {
  std::vector<RankProfile> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(healthyRank(r, 0.02 * ((r * 7) % 5 - 2)));
  return ranks;
}

// Collective instances as every member's timeline would show them; `extra_ns` lengthens
// every instance of communicator `comm` (a slow ring).
void addInstances(std::vector<RankProfile>& ranks, const std::string& comm, const std::vector<int>& members,
                  const std::string& name, int64_t duration_ns) {
  for (size_t cr = 0; cr < members.size(); ++cr) {
    RankProfile& p = ranks[static_cast<size_t>(members[cr])];
    CollectiveTotals c;
    c.comm = comm;
    c.name = name;
    c.bytes = 1 << 20;
    c.comm_size = static_cast<int>(members.size());
    c.comm_rank = static_cast<int>(cr);
    c.count = 20;
    c.ns = 20 * duration_ns;
    p.collectives[name + " " + comm + " 1048576"] = c;
    for (uint64_t seq = 0; seq < 20; ++seq) {
      // Members arrive at different times; the transfer starts when the last arrives.
      int64_t arrive = static_cast<int64_t>(seq) * kSecond + static_cast<int64_t>(cr) * 3 * kMs;
      int64_t last = static_cast<int64_t>(seq) * kSecond + static_cast<int64_t>(members.size() - 1) * 3 * kMs;
      p.collective_instances.push_back({comm, name, seq, 1 << 20, c.comm_size, arrive, last + duration_ns});
    }
  }
}

std::vector<std::string> kinds(const SlowdownAnalysis& a) {
  std::vector<std::string> k;
  for (const auto& f : a.findings) k.push_back(f.kind);
  return k;
}

}  // namespace

TEST_CASE("RobustSpreadHasAFloorWhenMostRanksAgreeExactly") {
  RobustSpread s = robustSpread({10, 10, 10, 4}, 0.1);
  CHECK(s.median == 10);
  CHECK(s.scale == Approx(1.0));  // MAD is 0; the floor is 10% of the median
  CHECK(robustZ(4, s) == Approx(-6));
}

TEST_CASE("MedianOfEvenCountAveragesTheMiddlePair") {
  CHECK(median({4, 1, 3, 2}) == Approx(2.5));
  CHECK(median({}) == 0);
}

TEST_CASE("HealthyJobGivesNoFindings") {
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(healthyJob()));
  CHECK(a.findings.empty());
}

TEST_CASE("GpuAtSixtyPercentOnEveryShapeIsASlowGpu") {
  auto ranks = healthyJob();
  for (auto& [shape, g] : ranks[2].gemms) g.ns = static_cast<int64_t>(g.ns / 0.6);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(a.findings.size() == 1);
  CHECK(a.findings[0].kind == "slow-gpu");
  CHECK(a.findings[0].ranks == std::vector<int>{2});
  CHECK(a.findings[0].owner == "operations");
  CHECK(a.findings[0].value / a.findings[0].group_median == Approx(0.6).epsilon(0.1));
}

TEST_CASE("GemmsSlowedOnlyWhileOverlappingCommunicationAreNotASlowGpu") {
  auto ranks = healthyJob();
  // Rank 2's window totals look slow, but the GEMMs that ran alone are at full speed.
  for (auto& [shape, g] : ranks[2].gemms) g.ns = static_cast<int64_t>(g.ns / 0.6);
  for (const auto& [shape, g] : healthyRank(2).gemms) ranks[2].gemms_alone[shape] = g;
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(kinds(a).empty());
}

TEST_CASE("IssueLatencyCollapsingOnOneRankIsAnIssueStallWithItsSyncs") {
  auto ranks = healthyJob();
  ranks[1].issue_latency.clear();
  for (int i = 0; i < 1000; ++i) ranks[1].issue_latency.add(2000);
  ranks[1].sync_count = 900;
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(a.findings.size() == 1);
  CHECK(a.findings[0].kind == "issue-stall");
  CHECK(a.findings[0].ranks == std::vector<int>{1});
  CHECK(a.findings[0].owner == "algorithm");
  bool names_syncs = std::any_of(a.findings[0].evidence.begin(), a.findings[0].evidence.end(),
                                 [](const std::string& e) { return e.find("synchronizations per step") != std::string::npos; });
  CHECK(names_syncs);
}

TEST_CASE("IssueLatencyCollapseWithoutExtraSyncsIsANoteNotAFinding") {
  auto ranks = healthyJob();
  ranks[1].issue_latency.clear();
  for (int i = 0; i < 1000; ++i) ranks[1].issue_latency.add(2000);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(a.findings.empty());
  bool noted = std::any_of(a.notes.begin(), a.notes.end(),
                           [](const std::string& n) { return n.find("rank 1") != std::string::npos; });
  CHECK(noted);
}

TEST_CASE("IdleBeforeNearlyEveryStepIsADataloaderStall") {
  auto ranks = healthyJob();
  ranks[3].inter_step_void_ns = 4 * kSecond;
  ranks[3].void_ns = ranks[3].void_ns + 3 * kSecond;
  for (auto& p : ranks)
    for (int s = 0; s < 50; ++s) p.step_gaps_ns.push_back(p.rank == 3 ? 40 * kMs : 5 * kMs);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(a.findings.size() == 1);
  CHECK(a.findings[0].kind == "dataloader-stall");
  CHECK(a.findings[0].ranks == std::vector<int>{3});
}

TEST_CASE("IdleBeforeAFewStepsIsAHostStall") {
  auto ranks = healthyJob();
  ranks[0].inter_step_void_ns = 3 * kSecond;
  for (auto& p : ranks)
    for (int s = 0; s < 50; ++s) p.step_gaps_ns.push_back(p.rank == 0 && s % 10 == 9 ? 60 * kMs : 5 * kMs);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(a.findings.size() == 1);
  CHECK(a.findings[0].kind == "host-stall");
  CHECK(a.findings[0].ranks == std::vector<int>{0});
}

TEST_CASE("IdleBetweenStepsWithNoLateStepInTheTimelineIsANoteNotAFinding") {
  // Rank 0 idled more between steps over the windows, but none of the 59 steps its timeline holds
  // was late: the idle came before them (start-up on a loaded host). Seen in a healthy CI run.
  auto ranks = healthyJob();
  ranks[0].inter_step_void_ns = 3 * kSecond;
  for (auto& p : ranks)
    for (int s = 0; s < 59; ++s) p.step_gaps_ns.push_back(5 * kMs);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(a.findings.empty());
  REQUIRE_FALSE(a.notes.empty());
  CHECK(a.notes.back().find("none of the 59 steps its timeline holds was late") != std::string::npos);
}

TEST_CASE("SlowRingAmongPeerRingsNamesTheOnlyLinkNoHealthyRingShares") {
  // 6 ranks, three 2-rank groups with AllGather plus a world ring; group {2,3} is slow.
  std::vector<RankProfile> ranks;
  for (int r = 0; r < 6; ++r) ranks.push_back(healthyRank(r));
  for (auto& p : ranks) p.collectives.clear();
  addInstances(ranks, "0xg0", {0, 1}, "ncclAllGather", 2 * kMs);
  addInstances(ranks, "0xg1", {2, 3}, "ncclAllGather", 10 * kMs);
  addInstances(ranks, "0xg2", {4, 5}, "ncclAllGather", 2 * kMs);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(a.findings.size() == 1);
  const SlowdownFinding& f = a.findings[0];
  CHECK(f.kind == "slow-link");
  CHECK(f.communicator == "0xg1");
  CHECK(f.ranks == std::vector<int>{2, 3});
  CHECK(f.value == Approx(f.group_median / 5).epsilon(0.01));
  // A 2-rank ring has the links 2->3 and 3->2: both are candidates, neither is named.
  CHECK_FALSE(f.link.has_value());
}

TEST_CASE("SlowWorldRingAndSlowGroupAgainstABaselineNameTheirSharedLink") {
  auto build = [](const std::string& world, int64_t world_ns, int64_t group0_ns) {
    std::vector<RankProfile> ranks;
    for (int r = 0; r < 4; ++r) ranks.push_back(healthyRank(r));
    for (auto& p : ranks) p.collectives.clear();
    addInstances(ranks, world, {0, 1, 2, 3}, "ncclAllReduce", world_ns);
    addInstances(ranks, world + "g0", {0, 1}, "ncclAllGather", group0_ns);
    addInstances(ranks, world + "g1", {2, 3}, "ncclAllGather", 2 * kMs);
    return JobProfile::fromProfiles(ranks);
  };
  JobProfile base = build("0xbase", 5 * kMs, 2 * kMs);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(build("0xslow", 15 * kMs, 6 * kMs), &base);
  // World ring links 0->1 1->2 2->3 3->0, group {0,1}: 0->1 1->0; group {2,3} is healthy.
  REQUIRE(a.findings.size() == 1);
  const SlowdownFinding& f = a.findings[0];
  CHECK(f.kind == "slow-link");
  REQUIRE(f.link.has_value());
  CHECK(f.link->from == 0);
  CHECK(f.link->to == 1);
  CHECK(f.ranks == std::vector<int>{0, 1});
}

TEST_CASE("LateArrivalsDoNotLowerACommunicatorsBandwidth") {
  std::vector<RankProfile> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(healthyRank(r));
  for (auto& p : ranks) p.collectives.clear();
  addInstances(ranks, "0xa", {0, 1}, "ncclAllGather", 2 * kMs);
  addInstances(ranks, "0xb", {2, 3}, "ncclAllGather", 2 * kMs);
  // Rank 2 waits 200 ms for its late partner every time: the transfer is as fast.
  for (auto& c : ranks[2].collective_instances) c.start_ns -= 200 * kMs;
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(kinds(a).empty());
}

TEST_CASE("BaselineShowsAnIssueStallOnEveryRank") {
  auto base = JobProfile::fromProfiles(healthyJob());
  auto ranks = healthyJob();
  for (auto& p : ranks) {
    p.issue_latency.clear();
    for (int i = 0; i < 1000; ++i) p.issue_latency.add(1500);
    p.sync_count = 900;
  }
  SlowdownAnalysis alone = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(alone.findings.empty());  // every rank alike: nothing stands out without a baseline
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks), &base);
  REQUIRE(a.findings.size() == 1);
  CHECK(a.findings[0].kind == "issue-stall");
  CHECK(a.findings[0].ranks == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("IdlingMoreThanTheBaselineIsAFindingOnlyWhenTheWholeJobDoesIt") {
  auto base = JobProfile::fromProfiles(healthyJob());  // 16% void
  auto everyone = healthyJob();
  for (auto& p : everyone) p.void_ns = 3 * kSecond;
  SlowdownAnalysis all = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(everyone), &base);
  REQUIRE(all.findings.size() == 1);
  CHECK(all.findings[0].kind == "void");
  CHECK(all.findings[0].ranks == std::vector<int>{0, 1, 2, 3});

  // One rank past the baseline threshold but not apart from the others of its run: a note.
  auto one = healthyJob();
  for (auto& p : one) p.void_ns = static_cast<int64_t>(2.2 * kSecond);
  one[0].void_ns = static_cast<int64_t>(2.8 * kSecond);
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(one), &base);
  CHECK(kinds(a).empty());
  CHECK(std::any_of(a.notes.begin(), a.notes.end(),
                    [](const std::string& n) { return n.find("idle more than in the baseline") != std::string::npos; }));
}

TEST_CASE("HealthyRunAgainstItsBaselineGivesNoFindings") {
  auto base = JobProfile::fromProfiles(healthyJob());
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(healthyJob()), &base);
  CHECK(a.findings.empty());
}

TEST_CASE("TwoRanksAreNotComparedWithEachOther") {
  auto ranks = healthyJob(2);
  for (auto& [shape, g] : ranks[1].gemms) g.ns *= 3;
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  CHECK(a.findings.empty());
  CHECK_FALSE(a.notes.empty());
}

namespace {

// NCCL proxy-step totals of ring `nccl_comm` over `members` (comm rank = position):
// each sender has data on the wire `shares[i]` of its time, and moves 180 MiB in it
// (`bytes[i]` MiB when given).
void addWireTimes(std::vector<RankProfile>& ranks, const std::string& nccl_comm, const std::vector<int>& members,
                  const std::vector<double>& shares, const std::vector<uint64_t>& mib = {}) {
  const int n = static_cast<int>(members.size());
  for (int cr = 0; cr < n; ++cr) {
    RankProfile& p = ranks[static_cast<size_t>(members[static_cast<size_t>(cr)])];
    LinkTotals l;
    l.nccl_comm = nccl_comm;
    l.comm_size = n;
    l.comm_rank = cr;
    l.peer = (cr + 1) % n;
    l.bytes = (mib.empty() ? 180u : mib[static_cast<size_t>(cr)]) << 20;
    l.steps = l.bytes >> 16;  // 64 KiB steps
    l.busy_ns = static_cast<int64_t>(shares[static_cast<size_t>(cr)] * static_cast<double>(p.window_ns));
    p.links[nccl_comm + " " + std::to_string(cr) + " " + std::to_string(l.peer)] = l;
  }
}

}  // namespace

TEST_CASE("ALinkThatHoldsItsDataFarLongerThanTheRingsOthersIsNamedWithoutABaseline") {
  auto ranks = healthyJob();
  addInstances(ranks, "0xw", {0, 1, 2, 3}, "ncclAllReduce", 15 * kMs);
  addWireTimes(ranks, "0x77", {0, 1, 2, 3}, {0.006, 0.424, 0.004, 0.003});
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(kinds(a) == std::vector<std::string>{"slow-link"});
  const SlowdownFinding& f = a.findings[0];
  REQUIRE(f.link.has_value());
  CHECK(f.link->from == 1);
  CHECK(f.link->to == 2);
  CHECK(f.ranks == std::vector<int>{1, 2});
  CHECK(f.owner == "operations");
  CHECK(f.metric == "link_wire_pct");
  CHECK(f.value == Approx(42.4));
  CHECK(f.group_median == Approx(0.4));
  // The watchdog's hash of the ring with the same members, so text and JSON name one communicator.
  CHECK(f.communicator == "0xw");
  REQUIRE(f.evidence.size() >= 3);
  CHECK(f.evidence[2].find("host0") != std::string::npos);
  CHECK(f.evidence[2].find("host1") != std::string::npos);
}

TEST_CASE("ARingWhoseLinksShareTheWireAlikeNamesNoLink") {
  auto ranks = healthyJob();
  addWireTimes(ranks, "0x77", {0, 1, 2, 3}, {0.096, 0.095, 0.114, 0.093});
  CHECK(kinds(SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks))).empty());
  // Mostly idle links are not compared by ratio alone: 4% against 0.5% is no bottleneck
  // when the link moved 8x the bytes in it, at the others' rate.
  auto idle = healthyJob();
  addWireTimes(idle, "0x77", {0, 1, 2, 3}, {0.005, 0.04, 0.004, 0.006}, {25, 200, 20, 30});
  CHECK(kinds(SlowdownAnalyzer().analyze(JobProfile::fromProfiles(idle))).empty());
}

TEST_CASE("ALinkMovingItsDataAtAQuarterOfTheOthersRateIsNamedThoughTheJobWaitsElsewhere") {
  // 6 ranks on 2 loaded cores, slow-link=5->0:0.25: the CPU, not the link, sets the step
  // time, so no link holds the wire 15 points longer; its rate is what shows.
  auto ranks = healthyJob(6);
  addWireTimes(ranks, "0x77", {0, 1, 2, 3, 4, 5}, {0.021, 0.022, 0.02, 0.021, 0.022, 0.076},
               {180, 180, 180, 180, 180, 170});
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(kinds(a) == std::vector<std::string>{"slow-link"});
  const SlowdownFinding& f = a.findings[0];
  REQUIRE(f.link.has_value());
  CHECK(f.link->from == 5);
  CHECK(f.link->to == 0);
  CHECK(f.metric == "link_wire_gbps");
  CHECK(f.value == Approx(0.26 * f.group_median).epsilon(0.05));
  CHECK(f.evidence[0].find("degraded") != std::string::npos);
}

TEST_CASE("OnTwoNodesTheReceiversThatSendOnNoNetworkLinkAreKnownFromTheirCollectives") {
  // Nodes {0, 1} and {2, 3}: only 1->2 and 3->0 cross nodes, so ranks 0 and 2 report no
  // link of their own; the collectives' ring positions say who they are.
  auto ranks = healthyJob();
  addWireTimes(ranks, "0x77", {0, 1, 2, 3}, {0.02, 0.02, 0.02, 0.08});
  ranks[0].links.clear();
  ranks[2].links.clear();
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(kinds(a) == std::vector<std::string>{"slow-link"});
  REQUIRE(a.findings[0].link.has_value());
  CHECK(a.findings[0].link->from == 3);
  CHECK(a.findings[0].link->to == 0);
  CHECK(a.findings[0].communicator == "0xw");
}

TEST_CASE("ALinkOfSmallStepsOrLittleWireTimeIsNotComparedByRate") {
  // Latency-bound small steps move slower than the others' 64 KiB ones: no finding.
  auto small = healthyJob();
  addWireTimes(small, "0x77", {0, 1, 2, 3}, {0.02, 0.02, 0.02, 0.02}, {180, 180, 180, 20});
  small[3].links.begin()->second.steps *= 16;  // 4 KiB steps
  CHECK(kinds(SlowdownAnalyzer().analyze(JobProfile::fromProfiles(small))).empty());
  // 10 ms on the wire in all is too little to tell a rate from noise.
  auto brief = healthyJob();
  addWireTimes(brief, "0x77", {0, 1, 2, 3}, {0.004, 0.004, 0.004, 0.001}, {180, 180, 180, 10});
  CHECK(kinds(SlowdownAnalyzer().analyze(JobProfile::fromProfiles(brief))).empty());
}

TEST_CASE("TheLinkIntoAGpuAlreadyNamedSlowIsNotNamedAsDegraded") {
  auto ranks = healthyJob();
  for (auto& [shape, g] : ranks[2].gemms) g.ns = static_cast<int64_t>(static_cast<double>(g.ns) / 0.6);
  addWireTimes(ranks, "0x77", {0, 1, 2, 3}, {0.02, 0.08, 0.02, 0.02});
  CHECK(kinds(SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks))) == std::vector<std::string>{"slow-gpu"});
}

TEST_CASE("ABottleneckOnTwoRingsIsOneFindingThatExplainsTheSlowGroup") {
  auto ranks = healthyJob();
  for (auto& p : ranks) p.collectives.clear();
  addInstances(ranks, "0xg0", {0, 1}, "ncclAllGather", 6 * kMs);
  addInstances(ranks, "0xg1", {2, 3}, "ncclAllGather", 2 * kMs);
  addWireTimes(ranks, "0x10", {0, 1}, {0.40, 0.01});
  addWireTimes(ranks, "0x11", {2, 3}, {0.05, 0.05});
  addWireTimes(ranks, "0x12", {0, 1, 2, 3}, {0.45, 0.01, 0.02, 0.01}, {180, 4, 8, 4});
  SlowdownAnalysis a = SlowdownAnalyzer().analyze(JobProfile::fromProfiles(ranks));
  REQUIRE(kinds(a) == std::vector<std::string>{"slow-link"});
  const SlowdownFinding& f = a.findings[0];
  REQUIRE(f.link.has_value());
  CHECK(f.link->from == 0);
  CHECK(f.link->to == 1);
  CHECK(f.value == Approx(40).margin(5.1));
  auto mentions = [&](const std::string& s) {
    return std::any_of(f.evidence.begin(), f.evidence.end(), [&](const std::string& e) { return e.find(s) != std::string::npos; });
  };
  CHECK(mentions("too"));    // the second ring it slows
  CHECK(mentions("0xg0"));   // the slow group's bandwidth, as evidence of the same link
}
