// A verdict from the snapshots alone (issue 12): NCCL's profiler progress of each network
// connection names a dead link or a stopped GPU without any debugger record, narrows a fault
// inside a node to that node's ranks, and must agree with the debugger's records when both
// exist. The connection states follow what NCCL 2.28's net transport records on a ring that
// stopped (analyzer/verdict/README.md): downstream of the fault connections are empty (the
// sender's GPU has nothing to send), upstream they are full (the receiver's GPU takes nothing,
// the sender waits for a posted buffer).
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

constexpr uint64_t kProxySeq = 7;
const std::string kNcclId = "00000000000abcde";

struct Fault {
  std::optional<Link> dead_link;
  std::optional<int> dead_rank;
};

SnapshotProxyConnection end(int rank, int world, int channel, int peer, bool send, std::array<uint64_t, 4> steps) {
  SnapshotProxyConnection c;
  c.nccl_comm = kNcclId;
  c.rank = rank;
  c.nranks = world;
  c.channel = channel;
  c.peer = peer;
  c.dir = send ? "send" : "recv";
  c.ops = 3;
  c.ops_done = 2;
  c.steps = steps;
  for (int i = 0; i < 4; ++i) c.moved_s_ago[i] = 4.0 + i;
  return c;
}

// Adds to every rank what NCCL's proxies show for a ring 0 -> 1 -> ... -> world-1 -> 0 that
// stopped at `fault`, `per_node` consecutive ranks a node (hosts "node<k>"). Only links
// between nodes report.
void addProxyProgress(std::vector<FakeRank>& ranks, int per_node, int channels, Fault fault) {
  const int n = static_cast<int>(ranks.size());
  const int origin = fault.dead_link ? fault.dead_link->to : *fault.dead_rank;  // the first rank starved
  for (FakeRank& r : ranks) {
    const int me = *r.snap.identity.rank;
    r.snap.identity.host = "node" + std::to_string(me / per_node);
    r.dump.host = r.snap.identity.host;
    r.snap.comms[0].nccl_id = kNcclId;
    r.snap.progress = SnapshotProgress{};
    r.snap.progress->plugin_inits = 1;
    for (int ch = 0; ch < channels; ++ch) r.snap.progress->kernel_channels.push_back({kNcclId, ch, 8, 7, 4.0, 5.0});
  }
  for (int x = 0; x < n; ++x) {
    const int y = (x + 1) % n;
    if (x / per_node == y / per_node) continue;  // P2P inside a node: no proxy
    std::array<uint64_t, 4> send, recv;
    const int k = (x - origin + n) % n;  // connections downstream of the origin
    if (fault.dead_link && x == fault.dead_link->from) {
      send = {16, 16, 16, 8};  // on the wire, never completed
      recv = {16, 8, 8, 8};    // waiting for the data
    } else if (k < n / 2) {
      send = {16, 8, 8, 8};  // empty: the sender's GPU has nothing to send
      recv = {16, 8, 8, 8};
    } else {
      send = {24, 24, 16, 16};  // full: the receiver posts no buffer
      recv = {16, 16, 16, 8};   // its GPU takes nothing
    }
    for (int ch = 0; ch < channels; ++ch) {
      ranks[x].snap.progress->connections.push_back(end(x, n, ch, y, true, send));
      ranks[y].snap.progress->connections.push_back(end(y, n, ch, x, false, recv));
    }
  }
}

// Snapshots only (HANGWATCH_COLLECT=0): no forensics dumps at all.
Verdict verdictOf(const std::vector<FakeRank>& ranks, bool with_dumps = false) {
  verdict_test::TempDir dir;
  for (const FakeRank& r : ranks) {
    const int n = *r.snap.identity.rank;
    (void)writeFileAtomically(watchdogSnapshotPath(dir.path, n), toJson(r.snap).dump());
    if (with_dumps) (void)writeFileAtomically(forensicsDumpPath(dir.path, n), toJson(r.dump).dump());
  }
  verdict_test::writeTrigger(dir.path, 0, kProxySeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job)).verdict;
}

std::vector<FakeRank> job(int world) {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(r, world, kProxySeq);
  return ranks;
}

std::string all(const Verdict& v) {
  std::string t = v.headline + "\n" + v.reason + "\n";
  for (const std::string& e : v.evidence) t += e + "\n";
  return t;
}

}  // namespace

TEST_CASE("ADeadLinkIsNamedFromTheSnapshotsAloneWhenEveryLinkIsANetworkLink") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{5, 6}, std::nullopt});
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
  CHECK(v.confident);
  CHECK(v.source == "profiler");
  CHECK(v.channels_agree == 2);
  CHECK(all(v).find("holds steps on the wire") != std::string::npos);
}

TEST_CASE("TwoLinksOnTheWireAreBothSuspectsWhenNoDebuggerRan") {
  // Two dead network links (the campaign's two-faults, collector off): each holds steps on
  // the wire; the snapshots cannot say which stopped first, so both are suspects.
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{1, 2}, std::nullopt});
  for (SnapshotProxyConnection& c : ranks[5].snap.progress->connections)
    if (c.dir == "send" && c.peer == 6) c.steps = {16, 16, 16, 8};
  for (SnapshotProxyConnection& c : ranks[6].snap.progress->connections)
    if (c.dir == "recv" && c.peer == 5) c.steps = {16, 8, 8, 8};
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link);
  CHECK_FALSE(v.hinges_on.empty());
  auto suspected = [&](Link l) {
    return std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) { return s.link == l; });
  };
  CHECK(suspected(Link{1, 2}));
  CHECK(suspected(Link{5, 6}));
}

TEST_CASE("AStoppedGpuIsNamedFromTheSnapshotsAlone") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {std::nullopt, 3});
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK_FALSE(v.culprit_link);
  CHECK(v.source == "profiler");
}

TEST_CASE("ADeadLinkBetweenTwoNodesIsNamedFromTheSnapshots") {
  auto ranks = job(8);
  addProxyProgress(ranks, 4, 2, {Link{3, 4}, std::nullopt});
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{3, 4});
  CHECK(v.source == "profiler");
}

TEST_CASE("ADeadLinkInsideANodeIsNarrowedToThatNodeAndSaidSo") {
  for (Link dead : {Link{1, 2}, Link{5, 6}}) {
    auto ranks = job(8);
    addProxyProgress(ranks, 4, 2, {dead, std::nullopt});
    const Verdict v = verdictOf(ranks);
    INFO(all(v));
    CHECK(v.kind == VerdictKind::kInconclusive);
    CHECK_FALSE(v.culprit_link);
    CHECK(v.culprit_ranks.empty());
    CHECK_FALSE(v.confident);
    CHECK(v.reason.find("no per-link data for links inside a node") != std::string::npos);
    const int node = dead.from / 4;
    REQUIRE(v.suspects.size() == 1);
    CHECK(v.suspects[0].ranks == std::vector<int>{node * 4, node * 4 + 1, node * 4 + 2, node * 4 + 3});
    CHECK(v.reason.find("node" + std::to_string(node)) != std::string::npos);
  }
}

TEST_CASE("ADeadRankInsideANodeIsNarrowedToItsNode") {
  auto ranks = job(8);
  addProxyProgress(ranks, 4, 1, {std::nullopt, 6});
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK_FALSE(v.confident);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{4, 5, 6, 7});
}

TEST_CASE("TheDebuggerAndTheProfilerAgreeingSaySoAndDisagreeingNameNeither") {
  auto agreeing = verdict_test::ringJob(
      8, kProxySeq, 2, [](int from, int) { return from == 5 ? 3u : 40u; }, [](int from, int) { return from == 5 ? 3u : 40u; });
  addProxyProgress(agreeing, 1, 2, {Link{5, 6}, std::nullopt});
  Verdict v = verdictOf(agreeing, true);
  INFO(all(v));
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
  CHECK(v.source == "debugger and profiler");
  CHECK(v.confident);

  auto disagreeing = verdict_test::ringJob(
      8, kProxySeq, 2, [](int from, int) { return from == 5 ? 3u : 40u; }, [](int from, int) { return from == 5 ? 3u : 40u; });
  addProxyProgress(disagreeing, 1, 2, {Link{2, 3}, std::nullopt});
  v = verdictOf(disagreeing, true);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link);
  REQUIRE(v.suspects.size() == 2);
  CHECK(v.reason.find("disagree") != std::string::npos);
}

TEST_CASE("WithoutTheProfilersDataTheVerdictSaysWhyNotInsteadOfGuessing") {
  auto ranks = job(8);  // no progress sections: the plugin did not run
  Verdict v = verdictOf(ranks);
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK(v.reason.find("the plugin did not run") != std::string::npos);

  auto intra = job(4);  // one node: every link is P2P, the profiler reports none
  addProxyProgress(intra, 4, 1, {Link{1, 2}, std::nullopt});
  v = verdictOf(intra);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK(v.reason.find("no network connection") != std::string::npos);
  // Every rank of the communicator runs on node0: whatever stopped it is inside that node.
  CHECK_FALSE(v.confident);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(v.reason.find("run on host node0") != std::string::npos);
}

TEST_CASE("ACommunicatorWithoutNetworkLinksIsOnlyPutInANodeWhenEveryMemberSaysWhichNode") {
  auto one_silent = job(4);
  addProxyProgress(one_silent, 4, 1, {Link{1, 2}, std::nullopt});
  one_silent[3].snap.identity.host.clear();  // a snapshot that does not name its host
  Verdict v = verdictOf(one_silent);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK(v.suspects.empty());
  CHECK(v.reason.find("run on host") == std::string::npos);
}

TEST_CASE("ProfilerProgressOfAnotherCommunicatorIsNotMistakenForTheHungOne") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{5, 6}, std::nullopt});
  for (FakeRank& r : ranks) r.snap.comms[0].nccl_id = "0000000000000bad";  // the hung one is another id
  const Verdict v = verdictOf(ranks);
  CHECK_FALSE(v.culprit_link);
  CHECK(v.kind == VerdictKind::kInconclusive);
}

TEST_CASE("RecordsKeyedByNcclsOwnIdReachTheVerdictThroughTheSnapshotsNcclId") {
  // The nccl-host and cuda readers cannot compute the watchdog's hash; they give NCCL's.
  auto ranks = verdict_test::ringJob(
      8, kProxySeq, 2, [](int from, int) { return from == 5 ? 3u : 40u; }, [](int from, int) { return from == 5 ? 3u : 40u; });
  for (FakeRank& r : ranks) {
    r.snap.comms[0].nccl_id = kNcclId;
    for (RingProgress& p : r.dump.ring_progress) {
      p.comm = "";
      p.nccl_comm = kNcclId;
      p.source = "nccl-host";
    }
  }
  Verdict v = verdictOf(ranks, true);
  INFO(all(v));
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
  CHECK(v.source == "debugger");

  for (FakeRank& r : ranks) r.snap.comms[0].nccl_id = "";  // nothing ties them: no record counts
  v = verdictOf(ranks, true);
  CHECK_FALSE(v.culprit_link);
  CHECK(v.kind == VerdictKind::kInconclusive);
}

TEST_CASE("OneProcessDrivingFourDevicesGetsTheDeadLinkOfItsRingExchangeNamed") {
  // examples/device_ring: ncclCommInitAll communicators, one group of ncclSend/ncclRecv per
  // step; the link 1 -> 2 died. One snapshot holds all four communicator ranks.
  verdict_test::TempDir dir;
  WatchdogSnapshot s;
  s.time_unix_s = 1000.5;
  s.timeout_s = 2;
  s.identity.rank = 0;
  s.identity.rank_source = "communicator";
  s.identity.host = "box";
  s.identity.pid = 4242;
  s.identity.job_id = "job1";
  for (int d = 0; d < 4; ++d) s.comms.push_back({verdict_test::kComm, d, 4, d, "live", std::nullopt, std::nullopt, kNcclId, "", {}, {}, 0, ""});
  // Each device's stream holds its group of the hung step: the send to its next, the receive
  // from its prev.
  for (int d = 0; d < 4; ++d) {
    SnapshotStream st;
    st.stream = fmt::format("0x51000{}0", d);
    st.device = d;
    st.pending.push_back({"ncclSend", "p2p", verdict_test::kComm, std::nullopt, 4096, "float32", 1024, (d + 1) % 4, 2.0,
                          2.1, true, std::nullopt});
    st.pending.push_back({"ncclRecv", "p2p", verdict_test::kComm, std::nullopt, 4096, "float32", 1024, (d + 3) % 4, 0.0,
                          2.1, true, std::nullopt});
    s.streams.push_back(st);
  }
  s.progress = SnapshotProgress{};
  s.progress->plugin_inits = 4;
  for (int d = 0; d < 4; ++d) {
    const bool dead = d == 1;
    s.progress->connections.push_back(end(d, 4, 0, (d + 1) % 4, true, dead ? std::array<uint64_t, 4>{4, 4, 4, 0}
                                                                              : std::array<uint64_t, 4>{4, 4, 4, 4}));
  }
  (void)writeFileAtomically(watchdogSnapshotPath(dir.path, 0), toJson(s).dump());
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  // The report's ranks are the four GPUs' (DESIGN.md §3), each on the one process.
  CHECK(job->world_size == 4);
  REQUIRE(job->gpu_ranks.size() == 4);
  CHECK(job->processes == 1);
  for (int d = 0; d < 4; ++d) {
    CHECK(job->gpu_ranks[d].rank == d);
    CHECK(job->gpu_ranks[d].process == 0);
    CHECK(job->gpu_ranks[d].device == d);
    REQUIRE(job->find(d));
    CHECK(job->find(d)->pending.size() == 2);  // its own stream's ops only
    CHECK(job->find(d)->proxy_ends.size() == 1);
  }
  const Verdict v = ReportBuilder::build(std::move(*job)).verdict;
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{1, 2});
  CHECK(v.source == "profiler");
  CHECK(v.headline.find("rank 1 (host box, GPU 1, pid 4242, process 0)") != std::string::npos);
  CHECK_FALSE(v.link_in_comm_ranks);
}

namespace {

// `world` ranks on nodes of `per_node` (hosts node0, node1, ...), each with the profiler's
// progress of communicator kNcclId and nothing in it yet.
std::vector<FakeRank> onNodes(int world, int per_node) {
  auto ranks = job(world);
  for (FakeRank& r : ranks) {
    const int me = *r.snap.identity.rank;
    r.snap.identity.host = "node" + std::to_string(me / per_node);
    r.dump.host = r.snap.identity.host;
    r.snap.comms[0].nccl_id = kNcclId;
    r.snap.progress = SnapshotProgress{};
    r.snap.progress->plugin_inits = 1;
  }
  return ranks;
}

std::vector<FakeRank> twoNodesOfFour() { return onNodes(8, 4); }

// Two nodes of 4 (hosts node0, node1) on a ring 0..7 whose only network links are 3 -> 4 and
// 7 -> 0, both waiting at their sender (what simnccl and NCCL show for a stop inside a node):
// `done3to4` and `done7to0` are the steps each sender got done, cumulative since the start.
std::vector<FakeRank> bothNetLinksStarved(uint64_t done3to4, uint64_t done7to0, uint64_t ops7to0 = 3) {
  auto ranks = twoNodesOfFour();
  for (FakeRank& r : ranks) r.snap.progress->kernel_channels.push_back({kNcclId, 0, 3, 2, 3.0, 3.1});
  auto link = [&](int x, int y, uint64_t done, uint64_t ops) {
    SnapshotProxyConnection s = end(x, 8, 0, y, true, {done + 8, done, done, done});
    SnapshotProxyConnection r = end(y, 8, 0, x, false, {done + 8, done, done, done});
    s.ops = r.ops = ops;
    ranks[x].snap.progress->connections.push_back(s);
    ranks[y].snap.progress->connections.push_back(r);
  };
  link(3, 4, done3to4, 3);
  link(7, 0, done7to0, ops7to0);
  return ranks;
}

// Rank `r` as simnccl's dead rank leaves it: its host thread never came back from the call.
void blockedInTheCall(FakeRank& r) {
  r.snap.comms[0].last_issued_seq = kProxySeq - 1;
  r.snap.streams.clear();
  SnapshotHostCall h;
  h.call = "ncclAllReduce";
  h.tid = r.snap.identity.pid;
  h.age_s = 3.0;
  h.comm = verdict_test::kComm;
  h.seq = kProxySeq;
  r.snap.host_calls.push_back(h);
}

}  // namespace

TEST_CASE("WhenEveryNetworkLinkWaitsAtItsSenderTheFewestStepsSentPutTheStopInOneNode") {
  // A ring after the stop sends one chunk more per hop: 7 -> 0 (114 done) is nearer the stop
  // than 3 -> 4 (118), so it lies in node1, between 4 and 7.
  Verdict v = verdictOf(bothNetLinksStarved(118, 114));
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(all(v).find("7 -> 0 sent the fewest steps (114; 3 -> 4 118)") != std::string::npos);

  v = verdictOf(bothNetLinksStarved(110, 114));
  INFO(all(v));
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("StepCountsThatDoNotCompareLeaveEachNodeASuspectRatherThanGuessOne") {
  for (auto ranks : {bothNetLinksStarved(118, 118), bothNetLinksStarved(118, 114, 4)}) {
    // Equal counts, or counts over different operations: both nodes stay possible (one stop in
    // each, two dead links, looks the same from the network), so neither is picked: each node
    // is a suspect of its own, and the verdict says why.
    const Verdict v = verdictOf(ranks);
    INFO(all(v));
    CHECK(v.kind == VerdictKind::kInconclusive);
    CHECK_FALSE(v.confident);
    REQUIRE(v.suspects.size() == 2);
    CHECK(v.suspects[0].ranks == std::vector<int>{0, 1, 2, 3});
    CHECK(v.suspects[1].ranks == std::vector<int>{4, 5, 6, 7});
    CHECK(all(v).find("fewest steps") == std::string::npos);
    CHECK(all(v).find("bound a stop in every node") != std::string::npos);
  }
}

TEST_CASE("NetworkSendersTiedAtTheFewestStepsPutAStopBeforeEachOfThem") {
  // Four nodes of two on a ring 0..7: the network links 1->2, 3->4, 5->6 and 7->0 all wait
  // at their sender. One stop leaves one sender with the fewest steps; 3 -> 4 and 7 -> 0 tied
  // at 110 are two stops (say links 2->3 and 6->7 died), in nodes 1 and 3.
  auto ranks = onNodes(8, 2);
  for (FakeRank& r : ranks) r.snap.progress->kernel_channels.push_back({kNcclId, 0, 3, 2, 3.0, 3.1});
  for (int x : {1, 3, 5, 7}) {
    const int y = (x + 1) % 8;
    const uint64_t done = x == 3 || x == 7 ? 110 : 111;
    SnapshotProxyConnection snd = end(x, 8, 0, y, true, {done + 8, done, done, done});
    SnapshotProxyConnection rcv = end(y, 8, 0, x, false, {done + 8, done, done, done});
    snd.ops = rcv.ops = 3;
    ranks[static_cast<size_t>(x)].snap.progress->connections.push_back(snd);
    ranks[static_cast<size_t>(y)].snap.progress->connections.push_back(rcv);
  }
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{2, 3, 6, 7});
  CHECK(all(v).find("more than one place") != std::string::npos);
}

TEST_CASE("AStopInsideANodeStaysNarrowedToTheNodeWhateverItsHostThreadsDo") {
  // NCCL returns from the call once the work is queued, and every waiting rank's kernel channels
  // start and never stop: a host thread still in the call (a full work FIFO) names no GPU.
  auto ranks = bothNetLinksStarved(118, 114);
  blockedInTheCall(ranks[5]);
  Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{4, 5, 6, 7});

  ranks = bothNetLinksStarved(118, 114);
  blockedInTheCall(ranks[5]);
  ranks[5].snap.progress->kernel_channels[0].started = 2;
  v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.culprit_ranks.empty());

  // Stuck in the call on the other node: the network links put the stop elsewhere.
  ranks = bothNetLinksStarved(118, 114);
  blockedInTheCall(ranks[1]);
  v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.culprit_ranks.empty());
}

TEST_CASE("ADebuggerCulpritOutsideTheNodeTheProfilerNarrowedToIsNotConfident") {
  for (int dead_from : {5, 1}) {
    auto ranks = verdict_test::ringJob(
        8, kProxySeq, 1, [=](int from, int) { return from == dead_from ? 3u : 40u; },
        [=](int from, int) { return from == dead_from ? 3u : 40u; });
    auto progress = bothNetLinksStarved(118, 114);  // the stop is in node1
    for (int r = 0; r < 8; ++r) {
      ranks[r].snap.identity.host = progress[r].snap.identity.host;
      ranks[r].snap.comms[0].nccl_id = kNcclId;
      ranks[r].snap.progress = progress[r].snap.progress;
    }
    const Verdict v = verdictOf(ranks, true);
    INFO(all(v));
    REQUIRE(v.culprit_link);
    CHECK(*v.culprit_link == Link{dead_from, dead_from + 1});
    if (dead_from == 5) {
      CHECK(v.source == "debugger and profiler");
      CHECK(v.confident);
    } else {
      CHECK_FALSE(v.confident);
      CHECK(v.hinges_on.find("ranks 4, 5, 6 and 7") != std::string::npos);
    }
  }
}

namespace {

// The debugger's ring records of 8 ranks name the link 5 -> 6 (least progress on it).
std::vector<FakeRank> debuggerNames5To6() {
  return verdict_test::ringJob(
      8, kProxySeq, 2, [](int from, int) { return from == 5 ? 3u : 40u; }, [](int from, int) { return from == 5 ? 3u : 40u; });
}

// The link 5 -> 6 the ring named is a suspect of a verdict that names nobody.
void checkLinkHedged(const Verdict& v) {
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link);
  bool link_suspect = false;
  for (const Suspect& s : v.suspects) link_suspect = link_suspect || (s.link && *s.link == Link{5, 6});
  CHECK(link_suspect);
}

// NCCL's Coll events on every rank: `algo` launched `last_s_ago` seconds before the snapshot,
// and the stuck collective issued `issued_s_ago` seconds before it.
void addAlgorithm(std::vector<FakeRank>& ranks, const std::string& algo, double last_s_ago, double issued_s_ago) {
  for (FakeRank& r : ranks) {
    r.snap.streams[0].pending[0].issued_s_ago = issued_s_ago;
    r.snap.progress->algorithms.push_back({kNcclId, "RING", 40, 30.0});
    r.snap.progress->algorithms.push_back({kNcclId, algo, 3, last_s_ago});
  }
}

}  // namespace

// A tree rank waiting on one child holds the other child's data and has nothing for its
// parent (NCCL 2.28 src/proxy.cc, ncclProxySaveOp gives a tree rank several network peers on
// a channel): the ring's "neither takes nor gives" rule would name a healthy rank.
TEST_CASE("ARankThatLooksStoppedIsOnlyASuspectWhenNcclRanATreeSinceTheStuckCollective") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {std::nullopt, 3});
  addAlgorithm(ranks, "TREE", 4.0, 4.5);
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  bool rank3_suspect = false;
  for (const Suspect& s : v.suspects) rank3_suspect = rank3_suspect || std::count(s.ranks.begin(), s.ranks.end(), 3);
  CHECK(rank3_suspect);
  CHECK(all(v).find("NCCL launched TREE collective(s)") != std::string::npos);
}

TEST_CASE("ATreeThatFinishedBeforeTheStuckCollectiveWasIssuedLeavesTheRingRulesOn") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {std::nullopt, 3});
  addAlgorithm(ranks, "TREE", 9.0, 4.5);  // the last tree ran 4.5 s before the stuck ring collective
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(all(v).find("TREE") == std::string::npos);
}

TEST_CASE("ALinkOnTheWireIsNamedWhateverTheAlgorithm") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{5, 6}, std::nullopt});
  addAlgorithm(ranks, "PAT", 4.0, 4.5);
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
  CHECK(v.confident);
  CHECK(all(v).find("NCCL launched PAT collective(s)") != std::string::npos);
}

TEST_CASE("TheDebuggersLeastRingProgressIsOnlyASuspectWhenNcclRanATree") {
  // The debugger's ring records name 5 -> 6 and the profiler shows no link on the wire.
  auto ranks = debuggerNames5To6();
  addProxyProgress(ranks, 4, 2, {std::nullopt, 6});
  addAlgorithm(ranks, "TREE", 4.0, 4.5);
  const Verdict v = verdictOf(ranks, true);
  INFO(all(v));
  checkLinkHedged(v);
  CHECK(v.hinges_on.find("which algorithm the stuck collective ran") != std::string::npos);
  CHECK(v.next_steps.front().find("NCCL_ALGO=Ring") != std::string::npos);
}

// On a GPU the debugger reads the hung kernel's device function (gdb-scripts cuda_kernels.py:
// ncclDevFunc_AllReduce_Sum_f32_TREE_LL): a kernel that runs a tree makes the ring-named
// culprit a suspect even with no profiler at all.
TEST_CASE("AHungKernelTheDebuggerSawRunATreeMakesTheRingCulpritASuspect") {
  auto ranks = debuggerNames5To6();
  Verdict ring = verdictOf(ranks, true);
  REQUIRE(ring.culprit_link);  // the same records on a ring name the link
  CHECK(*ring.culprit_link == Link{5, 6});
  for (FakeRank& r : ranks)
    for (RingProgress& p : r.dump.ring_progress) p.algorithm = "TREE";
  const Verdict v = verdictOf(ranks, true);
  INFO(all(v));
  checkLinkHedged(v);
  CHECK(all(v).find("The debugger found the hung kernels") != std::string::npos);
}

// Over sockets NCCL's isend only queues (src/transport/net_socket.cc): a sender whose
// receiving host died sits in SendWait, "on the wire", as over a dead link. Without the
// receiver's own snapshot the two cannot be told apart.
TEST_CASE("ALinkOnTheWireWhoseReceiverSentNoSnapshotIsOnlyASuspectWithThatRank") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{5, 6}, std::nullopt});
  ranks.erase(ranks.begin() + 6);  // rank 6 wrote nothing
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link);
  bool link_suspect = false, rank_suspect = false;
  for (const Suspect& s : v.suspects) {
    link_suspect = link_suspect || (s.link && *s.link == Link{5, 6});
    rank_suspect = rank_suspect || (!s.link && s.ranks == std::vector<int>{6});
  }
  CHECK(link_suspect);
  CHECK(rank_suspect);
}

namespace {

// Link 5 -> 6 of an 8-rank ring, one rank a node: 5 has a step ready and waits for 6's
// clear-to-send (SendPeerWait); 6 posted `recv_posted` buffers, none got data.
std::vector<FakeRank> creditJob(uint64_t recv_posted) {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {Link{5, 6}, std::nullopt});
  for (FakeRank& r : ranks) {
    for (SnapshotProxyConnection& c : r.snap.progress->connections) {
      const int me = *r.snap.identity.rank;
      if (me == 5 && c.dir == "send" && c.peer == 6) c.steps = {16, 9, 8, 8};
      if (me == 6 && c.dir == "recv" && c.peer == 5) c.steps = {recv_posted, 8, 8, 8};
    }
  }
  return ranks;
}

}  // namespace

// NCCL_NET=IB: the receiver's irecv posts the clear-to-send, the sender's isend returns no
// request until it arrives. Both ends waiting for each other means it was lost on the link;
// read as "the receiver posted no buffer" it would blame a rank that did.
TEST_CASE("AClearToSendLostBetweenTwoRanksNamesTheirLinkNotTheReceiver") {
  Verdict v = verdictOf(creditJob(9));
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
  CHECK(v.confident);
  CHECK(all(v).find("clear-to-send") != std::string::npos);

  // The receiver posted no buffer for the step: the sender waits on the receiver, not the link.
  v = verdictOf(creditJob(8));
  INFO(all(v));
  CHECK_FALSE(v.culprit_link);
  CHECK(all(v).find("clear-to-send") == std::string::npos);
}

// A collective replayed in a CUDA graph: NCCL may have sent its Coll event only at capture,
// long before the replay that hung, so a tree seen then still counts.
TEST_CASE("AGraphReplayCountsATreeSeenOnItsCommunicatorAtAnyTime") {
  auto ranks = job(8);
  addProxyProgress(ranks, 1, 2, {std::nullopt, 3});
  addAlgorithm(ranks, "TREE", 60.0, 4.5);
  for (FakeRank& r : ranks) {
    SnapshotPendingOp& op = r.snap.streams[0].pending[0];
    op.op = "cudaGraphLaunch: ncclAllReduce";
    op.op_class = "graph";
  }
  const Verdict v = verdictOf(ranks);
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK(v.culprit_ranks.empty());
  CHECK(all(v).find("NCCL launched TREE collective(s)") != std::string::npos);
}

namespace {

// NCCL's tree over two nodes of four (src/graph/trees.cc, connect.cc): channel 0 runs tree 0
// (node 0's first rank 0 the root, node 1's first rank 4 its child), channel 1 the mirrored
// tree 1 (4 the root, 0 its child). Something inside node 1 stopped (rank 4's GPU, or a rank
// of its chain 5 -> 6 -> 7 that 4 reduces from first). Only the links 0 <-> 4 report:
//   channel 0: 4 has sent nothing up to 0 (0 waits for it); 0 has nothing to broadcast to 4;
//   channel 1: 0's reduce arrived at 4 and 4's GPU does not take it; 4 broadcast nothing.
std::vector<FakeRank> treeStoppedInNodeOne() {
  auto ranks = twoNodesOfFour();
  for (FakeRank& r : ranks)
    for (int ch = 0; ch < 2; ++ch) r.snap.progress->kernel_channels.push_back({kNcclId, ch, 8, 7, 4.0, 5.0});
  auto link = [&](int channel, int from, int to, std::array<uint64_t, 4> send, std::array<uint64_t, 4> recv) {
    ranks[from].snap.progress->connections.push_back(end(from, 8, channel, to, true, send));
    ranks[to].snap.progress->connections.push_back(end(to, 8, channel, from, false, recv));
  };
  const std::array<uint64_t, 4> nothing_filled = {8, 0, 0, 0}, waiting = {8, 0, 0, 0};
  link(0, 4, 0, nothing_filled, waiting);
  link(0, 0, 4, nothing_filled, waiting);
  link(1, 0, 4, {8, 8, 8, 8}, {8, 8, 8, 0});  // arrived, the GPU takes none
  link(1, 4, 0, nothing_filled, waiting);
  addAlgorithm(ranks, "TREE", 4.0, 4.5);
  return ranks;
}

}  // namespace

// On a tree every rank that waits for its parent's broadcast or a child's reduce has nothing
// to send: a sender-side link puts the stop nowhere. Data that arrived and is not taken does.
TEST_CASE("OnATreeTheStopIsNarrowedToTheNodesWhoseGpusDoNotTakeWhatArrived") {
  const Verdict v = verdictOf(treeStoppedInNodeOne());
  INFO(all(v));
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{4, 5, 6, 7});
}

// Records of a tree name the tree peers each thread waits on; a ring's prev -> rank link that
// no record names is then not missing data. Without this the ring links of ranks 0 and 1,
// whose records are absent, became suspects of their own.
TEST_CASE("ATreesRecordsDoNotMakeTheRingLinksNobodyReportedSuspects") {
  auto ranks = verdict_test::ringJob(
      8, kProxySeq, 2, [](int from, int) { return from == 5 ? 3u : 40u; }, [](int from, int) { return from == 5 ? 3u : 40u; },
      {0, 1});
  for (FakeRank& r : ranks)
    for (RingProgress& p : r.dump.ring_progress) p.algorithm = "TREE";
  const Verdict v = verdictOf(ranks, true);
  INFO(all(v));
  checkLinkHedged(v);
  std::set<int> rank_suspects;
  for (const Suspect& s : v.suspects) {
    INFO(s.text);
    CHECK_FALSE((s.link && (*s.link == Link{0, 1} || *s.link == Link{1, 2} || *s.link == Link{7, 0})));
    if (!s.link && s.ranks.size() == 1) rank_suspects.insert(s.ranks[0]);
  }
  // Ranks 0 and 1 left no record: what their connections did is unknown, so they stay suspects.
  CHECK(rank_suspects == std::set<int>{0, 1});
}
