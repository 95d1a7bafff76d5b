#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/verdict/earlier_attempts.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

Report reportOfDir(const std::string& dir) {
  Expected<JobData> job = JobLoader(2).load(dir);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job));
}

void writeAll(const std::vector<FakeRank>& ranks, const std::string& dir) {
  for (const FakeRank& r : ranks) r.write(dir);
}

// The verdict on `ranks`' dumps, rank `trigger_rank` the first to time out, in seq `seq`.
Verdict verdictOf(const std::vector<FakeRank>& ranks, int trigger_rank, uint64_t seq) {
  verdict_test::TempDir dir;
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, trigger_rank, seq);
  return reportOfDir(dir.path).verdict;
}

bool mentions(const Verdict& v, const std::string& text) {
  if (v.headline.find(text) != std::string::npos) return true;
  for (const std::string& e : v.evidence) {
    if (e.find(text) != std::string::npos) return true;
  }
  return false;
}

auto deadLink(int from) {
  return std::pair{[from](int f, int ch) -> std::optional<uint64_t> { return f == from ? 80 : 83 + ch; },
                   [from](int f, int) -> std::optional<uint64_t> { return f == from ? 80 : 82; }};
}

}  // namespace

TEST_CASE("DeadLinkJobNamesTheLinkWithHostsAndGpus") {
  verdict_test::TempDir dir;
  auto [d, c] = deadLink(5);
  writeAll(verdict_test::ringJob(8, 10, 2, d, c), dir.path);
  verdict_test::writeTrigger(dir.path, 6, 10);
  Report r = reportOfDir(dir.path);
  const Verdict& v = r.verdict;
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link);
  CHECK(v.culprit_link->from == 5);
  CHECK(v.culprit_link->to == 6);
  CHECK(v.communicator == verdict_test::kComm);
  REQUIRE(v.op);
  CHECK(v.op->name == "ncclAllReduce");
  CHECK(v.op->seq == 10u);
  CHECK(v.channels_agree == 2);
  // Ranks 5 and 6 are GPUs 1 and 2 of node1.
  CHECK(mentions(v, "GPU 1 on host node1"));
  CHECK(mentions(v, "GPU 2 on host node1"));
  REQUIRE_FALSE(v.next_steps.empty());
  CHECK(v.next_steps.back().find("Drain host node1") != std::string::npos);
}

TEST_CASE("RingRecordsOfASplitCommunicatorJoinItsSnapshotThroughNcclsId") {
  // A communicator made by ncclCommSplit has no unique id: the debugger's reader hashes its
  // own (the segment's here), the watchdog hashes it from its parent. NCCL's id ties them.
  verdict_test::TempDir dir;
  auto [d, c] = deadLink(5);
  std::vector<FakeRank> ranks = verdict_test::ringJob(8, 10, 2, d, c);
  for (FakeRank& r : ranks) {
    r.snap.comms[0].nccl_id = "00000000005b1170";
    for (RingProgress& rp : r.dump.ring_progress) {
      rp.comm = "90b5c22817345b2f";
      rp.nccl_comm = "00000000005b1170";
    }
  }
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 6, 10);
  const Verdict v = reportOfDir(dir.path).verdict;
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link);
  CHECK(v.culprit_link->from == 5);
  CHECK(v.culprit_link->to == 6);
  CHECK(v.communicator == verdict_test::kComm);
}

TEST_CASE("ADeadLinkBetweenNodesNamesTheNicOfEachEndThatItsDebuggerRead") {
  // 3 -> 4 joins node0 and node1. Rank 3's send and rank 4's recv are NET connections whose
  // net device the debugger read; rank 4's only by index (the plugin's table unread).
  verdict_test::TempDir dir;
  auto [d, c] = deadLink(3);
  std::vector<FakeRank> ranks = verdict_test::ringJob(8, 10, 2, d, c);
  for (RingProgress& p : ranks[3].dump.ring_progress) p.send->nic = RingNic{3, "mlx5_3", 1};
  for (RingProgress& p : ranks[4].dump.ring_progress) p.recv->nic = RingNic{0, "", std::nullopt};
  for (RingProgress& p : ranks[2].dump.ring_progress) p.send->nic = RingNic{2, "mlx5_2", 1};  // not the culprit's
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 6, 10);
  Verdict v = reportOfDir(dir.path).verdict;
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{3, 4});
  REQUIRE(v.culprit_link_nics.size() == 2);
  CHECK(v.culprit_link_nics[0].rank == 3);
  CHECK(v.culprit_link_nics[0].sends);
  CHECK(v.culprit_link_nics[0].host == "node0");
  CHECK(v.culprit_link_nics[0].device == "mlx5_3");
  CHECK(v.culprit_link_nics[0].port == 1);
  CHECK(v.culprit_link_nics[1].rank == 4);
  CHECK_FALSE(v.culprit_link_nics[1].sends);
  CHECK(v.culprit_link_nics[1].index == 0);
  CHECK(mentions(v, "rank 3 sends through node0's mlx5_3 port 1; rank 4 receives through node1's net device 0"));
  REQUIRE(v.next_steps.size() >= 2);
  CHECK(v.next_steps[1].find("Check node0's mlx5_3 port 1:") == 0);  // only the NIC it could name

  // A link inside a node, or no NIC read: nothing said of NICs.
  verdict_test::TempDir inside;
  auto [d2, c2] = deadLink(5);
  writeAll(verdict_test::ringJob(8, 10, 2, d2, c2), inside.path);
  verdict_test::writeTrigger(inside.path, 6, 10);
  Verdict w = reportOfDir(inside.path).verdict;
  REQUIRE(w.culprit_link);
  CHECK(w.culprit_link_nics.empty());
  CHECK_FALSE(mentions(w, "NIC"));
  CHECK_FALSE(mentions(w, "net device"));
}

TEST_CASE("WithoutTheDebuggersReadingTheNicsComeFromNcclsInfoLinesWhenTheyAgree") {
  // The same dead link 3 -> 4 between node0 and node1, no NIC read by a debugger; the watchdog
  // kept NCCL's INFO lines (src/transport/net.cc's "Channel ... via NET/IB/<dev>").
  auto [d, c] = deadLink(3);
  std::vector<FakeRank> ranks = verdict_test::ringJob(8, 10, 2, d, c);
  const std::string using_line =
      "node0:41:41 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB "
      "eth0:10.0.0.1<0>";
  SnapshotNcclLog sender;
  sender.file = "/var/tmp/hangwatch-fallback/nccl-info/nccl.node0.41.log";
  sender.lines = {using_line, "node0:41:42 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/3/GDRDMA",
                  "node0:41:42 [0] NCCL INFO Channel 01/0 : 3[3] -> 4[0] [send] via NET/IB/3/GDRDMA",
                  "node0:41:42 [0] NCCL INFO Channel 00/0 : 2[2] -> 3[3] [receive] via NET/IB/1"};  // another link
  SnapshotNcclLog receiver;
  receiver.lines = {"node1:51:51 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.2<0>",
                    "node1:51:52 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [receive] via NET/IB/0",
                    "node1:51:52 [0] NCCL INFO Channel 01/0 : 3[3] -> 4[0] [receive] via NET/IB/0"};
  ranks[3].snap.nccl_log = sender;
  ranks[4].snap.nccl_log = receiver;
  Verdict v = verdictOf(ranks, 6, 10);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{3, 4});
  REQUIRE(v.culprit_link_nics.size() == 2);
  CHECK(v.culprit_link_nics[0].device == "mlx5_3");
  CHECK(v.culprit_link_nics[0].port == 1);
  CHECK(v.culprit_link_nics[0].source == "nccl-info");
  CHECK(v.culprit_link_nics[1].device == "mlx5_0");
  CHECK(v.culprit_link_nics[1].host == "node1");
  CHECK(mentions(v, "rank 3 sends through node0's mlx5_3 port 1; rank 4 receives through node1's mlx5_0 port 1 "
                    "(NCCL's own INFO line"));
  REQUIRE(v.next_steps.size() >= 2);
  CHECK(v.next_steps[1].find("Check node0's mlx5_3 port 1 and node1's mlx5_0 port 1:") == 0);

  // Another communicator with the same two ranks went through another NIC on the same channel:
  // the lines do not say which is the hung one's, so that end's NIC is not named.
  sender.lines.push_back("node0:41:43 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[1] [send] via NET/IB/2");
  ranks[3].snap.nccl_log = sender;
  Verdict w = verdictOf(ranks, 6, 10);
  REQUIRE(w.culprit_link_nics.size() == 1);
  CHECK_FALSE(w.culprit_link_nics[0].sends);
  CHECK(mentions(w, "NCCL's INFO lines name more than one NIC for the link's connections (rank 3's sending net "
                    "devices 2 and 3)"));
  // The debugger's reading, where there is one, comes first.
  for (RingProgress& p : ranks[3].dump.ring_progress) p.send->nic = RingNic{3, "mlx5_3", 1};
  Verdict both = verdictOf(ranks, 6, 10);
  REQUIRE(both.culprit_link_nics.size() == 2);
  CHECK(both.culprit_link_nics[0].source == "debugger");
  CHECK(both.culprit_link_nics[1].source == "nccl-info");
}

TEST_CASE("FlightRecorderDumpsAddTheProcessGroupAndWhoNeverEnqueuedButChangeNoVerdict") {
  // Rank 0's dump is the one torch 2.15 wrote on a dead link (pending: DDP's 263168-byte
  // gradient all-reduce, #20 of the default group); rank 1's is the same cut before #20.
  auto [d, c] = deadLink(0);
  verdict_test::TempDir plain, with_fr;
  for (const std::string& dir : {plain.path, with_fr.path}) {
    writeAll(verdict_test::ringJob(2, 10, 2, d, c), dir);
    verdict_test::writeTrigger(dir, 1, 10);
  }
  const std::string fixtures = std::string(HANGWATCH_FIXTURES_DIR) + "/flight-recorder/";
  std::filesystem::copy_file(fixtures + "torch-2.15-dead-link-rank0.pkl", flightRecorderPath(with_fr.path, 0));
  std::filesystem::copy_file(fixtures + "torch-2.15-dead-link-rank0-cut-at-19.pkl", flightRecorderPath(with_fr.path, 1));
  Verdict without = reportOfDir(plain.path).verdict;
  Verdict v = reportOfDir(with_fr.path).verdict;
  CHECK(v.kind == without.kind);
  CHECK(v.culprit_link == without.culprit_link);
  CHECK(v.confident == without.confident);
  CHECK(v.headline == without.headline);
  CHECK(mentions(v, "PyTorch's Flight Recorder: on rank(s) 0, nccl2:all_reduce #20 of process group 0 'default_pg', "
                    "ranks [0, 1] is scheduled, with no Python call site recorded"));
  CHECK(mentions(v, "PyTorch's Flight Recorder on rank 1 shows it never enqueued collective #20 of process group "
                    "'default_pg' (the last it recorded: #19)"));
  CHECK(v.evidence.size() == without.evidence.size() + 2);

  // A file that is no pickle of plain data is said and skipped.
  std::ofstream(flightRecorderPath(with_fr.path, 1), std::ios::trunc) << "cos\nsystem\n(S'echo'\ntR.";
  Verdict refused = reportOfDir(with_fr.path).verdict;
  CHECK(mentions(refused, "Flight Recorder dump not used:"));
  CHECK(mentions(refused, "refused pickle opcode"));
}

TEST_CASE("ALinkWhoseReceiverFinishedTheCollectiveIsNoConfidentCulprit") {
  // Found on PyTorch: rank 2 called one all-reduce more (of 1 element), finished it with the
  // first step from rank 1 and went on, while ranks 0, 1 and 3 wait in their seq 10. Link
  // 1 -> 2 made the least progress, but a dead 1 -> 2 could never have let rank 2 finish.
  verdict_test::TempDir dir;
  auto [d, c] = deadLink(1);
  std::vector<FakeRank> ranks = verdict_test::ringJob(4, 10, 2, d, c);
  SnapshotComm& comm = ranks[2].snap.comms[0];
  comm.last_issued_seq = 12;
  comm.last_completed_seq = 10;
  ranks[2].snap.streams[0].pending[0].seq = 11;
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 0, 10);
  Verdict v = reportOfDir(dir.path).verdict;
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link);
  std::set<std::string> suspects;
  for (const Suspect& s : v.suspects) suspects.insert(s.text);
  CHECK(suspects.size() == 2);
  CHECK(mentions(v, "yet its receiver, rank 2"));
  REQUIRE_FALSE(v.next_steps.empty());
  CHECK(v.next_steps[0].find("rank 2 issued") != std::string::npos);

  // The same stop with rank 2 still waiting in seq 10 is the dead link, named.
  verdict_test::TempDir waiting;
  writeAll(verdict_test::ringJob(4, 10, 2, d, c), waiting.path);
  verdict_test::writeTrigger(waiting.path, 0, 10);
  Verdict named = reportOfDir(waiting.path).verdict;
  CHECK(named.confident);
  REQUIRE(named.culprit_link);
  CHECK(*named.culprit_link == Link{1, 2});
}

TEST_CASE("TwoDeadLinksThatShareNoRankAreBothSuspectsNotNobody") {
  // Links 1->2 and 5->6 both stopped (two faults): each channel's least progress is on two
  // connections that share no rank, so ring progress names no single culprit; both links are
  // what the records show, and the verdict says the ring stopped in more than one place.
  verdict_test::TempDir dir;
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 1 || from == 5 ? 80 : 82; };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return from == 1 || from == 5 ? 80 : 82; };
  writeAll(verdict_test::ringJob(8, 10, 2, delivered, consumed), dir.path);
  verdict_test::writeTrigger(dir.path, 6, 10);
  const Verdict v = reportOfDir(dir.path).verdict;
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  std::set<std::pair<int, int>> links;
  for (const Suspect& s : v.suspects)
    if (s.link) links.insert({s.link->from, s.link->to});
  CHECK(links == std::set<std::pair<int, int>>{{1, 2}, {5, 6}});
  CHECK(v.headline.find("more than one place") != std::string::npos);
}

TEST_CASE("DeadRankJobNamesTheRank") {
  verdict_test::TempDir dir;
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 3 ? 40 : 47; };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return from == 2 ? 40 : 45; };
  writeAll(verdict_test::ringJob(4, 7, 2, delivered, consumed, {3}), dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{3});
  CHECK_FALSE(r.verdict.culprit_link);
  CHECK(mentions(r.verdict, "GPU 3 on host node0"));
}

TEST_CASE("RankThatNeverIssuedTheCollectiveIsANonCommunicationHangWithItsFrames") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[2].notInCollective(5, {"stall_in_host_loop", "train_step", "main"});
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 0, 5);
  Report r = reportOfDir(dir.path);
  const Verdict& v = r.verdict;
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{2});
  REQUIRE_FALSE(v.where.empty());
  CHECK(v.where.front().rank == 2);
  CHECK(v.where.front().frames.front() == "stall_in_host_loop");
  CHECK(mentions(v, "last collective issued on this communicator seq 4"));
  CHECK(mentions(v, "host node0"));
}

TEST_CASE("TheCulpritsMainThreadLeadsItsEvidenceWhateverItsThreadIdsOrder") {
  // After pid numbers wrap, a thread the rank started later (PyTorch's watchdog, named like the
  // process) can have a smaller id than the main thread and come first in the dump; the evidence
  // line is the main thread's, where the host code is stuck.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[2].notInCollective(5, {"stall_in_host_loop", "train_step", "main"});
  ranks[2].dump.threads.insert(ranks[2].dump.threads.begin(),
                               verdict_test::thread(7, "ring_train", {"pthread_cond_timedwait", "timeoutWatchdog"}));
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 0, 5);
  const Verdict v = reportOfDir(dir.path).verdict;
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  REQUIRE_FALSE(v.where.empty());
  CHECK(v.where.front().frames.front() == "stall_in_host_loop");
  CHECK(mentions(v, "Rank 2 thread ring_train is in stall_in_host_loop"));
}

TEST_CASE("ARankThatCalledAnAllReduceOfAnotherSizeIsNamedThoughItsPeersFinishedIt") {
  // Rank 0 reduced 2 floats at seq 5 where its peers reduced 1. They finished it (their sends
  // fit its buffers) and went on to seq 6, where they wait; rank 0 waits in seq 5. No two
  // pending operations share a position: only what each rank recorded issuing shows it.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 5);
    ranks[r].snap.streams[0].pending[0].count = r == 0 ? 2 : 1;
    ranks[r].issued(0, 5, r == 0 ? 2 : 1);
    ranks[r].issued(0, 4, 1);
    if (r > 0) {
      ranks[r].wentOn(8, 6);
      ranks[r].issued(6, 8, 1);
    }
  }
  const Verdict v = verdictOf(ranks, 2, 6);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{0});
  REQUIRE(v.op);
  CHECK(v.op->seq == 5u);
  CHECK(mentions(v, "ncclAllReduce (2 float32)"));
  CHECK(mentions(v, "ncclAllReduce (1 float32)"));
}

TEST_CASE("ARankThatCalledOneCollectiveMoreIsNamedWhereItsCollectivesFirstDiffer") {
  // Rank 2 called a 1-float all-reduce at seq 3 the others never called: from there on its
  // collectives are one position ahead of theirs (DDP's buckets: 300, 200, 100 floats per step).
  // The hang surfaces at seq 7, where every pending operation agrees.
  const std::vector<uint64_t> bucket = {300, 200, 100};
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 7);
    for (uint64_t q = 0; q <= 9; ++q) {
      const bool shifted = r == 2 && q > 3;
      ranks[r].issued(q, q, r == 2 && q == 3 ? 1 : bucket[(shifted ? q - 1 : q) % 3]);
    }
    ranks[r].snap.streams[0].pending[0].count = bucket[7 % 3];
  }
  ranks[2].wentOn(9, 8);  // its seq 8 is the others' seq 7, the same 200 floats
  const Verdict v = verdictOf(ranks, 0, 7);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{2});
  REQUIRE(v.op);
  CHECK(v.op->seq == 3u);
  CHECK(mentions(v, "The hang surfaced at ncclAllReduce seq 7"));
}

TEST_CASE("AnEarlierDifferenceIsHedgedWhenRanksWhoseRecordIsGoneCouldBeTheMajority") {
  // Rank 3 called another size at seq 5 than rank 2; the records of ranks 0 and 1 start at
  // seq 8: they could be on either side.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 20);
    ranks[r].issued(r < 2 ? 8 : 5, 20, 1);
  }
  ranks[3].issued(5, 5, 2);
  const Verdict v = verdictOf(ranks, 0, 20);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  CHECK(v.suspects.size() == 2);
}

TEST_CASE("TwoRanksThatCalledDifferentCollectivesAreBothSuspectsNeitherTheCulprit") {
  // A pair (a pipeline's send/recv partners, a TP group of two): no majority says which one
  // called what the program meant.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back(r, 2, 4);
    ranks[r].issued(0, 4, r == 0 ? 8 : 16);
  }
  const Verdict v = verdictOf(ranks, 0, 4);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  CHECK(v.suspects.size() == 2);
}

TEST_CASE("RecordsThatAgreeChangeNoVerdict") {
  // Every rank recorded the same collectives: a dead link stays the dead link.
  auto [d, c] = deadLink(5);
  std::vector<FakeRank> ranks = verdict_test::ringJob(8, 10, 2, d, c);
  for (FakeRank& r : ranks) r.issued(0, 10, 262144);
  const Verdict v = verdictOf(ranks, 6, 10);
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.confident);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{5, 6});
}

TEST_CASE("DifferentCollectiveAtTheSameSequenceNumberIsAMismatch") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[1].snap.streams[0].pending[0].op = "ncclAllGather";
  ranks[1].snap.streams[0].pending[0].count = 65536;
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kCollectiveMismatch);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{1});
  CHECK(mentions(r.verdict, "ncclAllGather"));
  CHECK(mentions(r.verdict, "ncclAllReduce"));
}

TEST_CASE("SameOperationWithDifferentSizesIsAMismatch") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[3].snap.streams[0].pending[0].count = 1;
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kCollectiveMismatch);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{3});
}

TEST_CASE("ARankThatFinishedTheCollectiveAndRanAheadSkippedNothing") {
  // Issue #24: a sender whose outgoing link died finishes its sends into the peer's buffers and
  // goes on, on NCCL as on simnccl. It completed seq 5: no mismatch, and never the culprit by itself.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, r == 0 ? 6 : 5);
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 1, 5);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind != VerdictKind::kCollectiveMismatch);
  CHECK(r.verdict.culprit_ranks.empty());
  CHECK(mentions(r.verdict, "finished it and went on (last issued seq 6)"));
}

TEST_CASE("WhenTheRankThatRanAheadTimesOutFirstTheHangIsWhereItsPeersWait") {
  // The same job, but rank 0, waiting in seq 6 for peers that never finish seq 5, was the
  // first to time out (the verdict matrix: --tp 4 --cuda-graph, a dead link inside the group):
  // seq 6 waits only on seq 5, where the others are overdue, and a dead link at 0 -> 1 shows there.
  verdict_test::TempDir dir;
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 0 ? 40 : 47; };
  auto consumed = [](int, int) -> std::optional<uint64_t> { return 47; };
  std::vector<FakeRank> ranks = verdict_test::ringJob(4, 5, 2, delivered, consumed, {0});
  ranks[0] = FakeRank(0, 4, 6);
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 0, 6);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  REQUIRE(r.verdict.culprit_link);
  CHECK(*r.verdict.culprit_link == Link{0, 1});
  CHECK(mentions(r.verdict, "seq 5"));
}

namespace {

const std::string kTpComm = "7b7b7b7b7b7b7b7b";

// Rank `r`, comm rank `tp_rank` of a second communicator of `tp_size`, where it last issued
// `issued` and has `pending` (seq, age) pending.
void onTensorParallel(FakeRank& r, int tp_rank, int tp_size, uint64_t issued,
                      std::optional<std::pair<uint64_t, double>> pending) {
  SnapshotComm c;
  c.hash = kTpComm;
  c.rank = tp_rank;
  c.size = tp_size;
  c.last_issued_seq = issued;
  c.last_completed_seq = pending ? pending->first - 1 : issued;
  r.snap.comms.push_back(c);
  if (!pending) return;
  SnapshotPendingOp op;
  op.op = "ncclReduceScatter";
  op.op_class = "collective";
  op.comm = kTpComm;
  op.seq = pending->first;
  op.count = 4096;
  op.dtype = "float32";
  op.age_s = pending->second;
  if (r.snap.streams.empty()) r.snap.streams.emplace_back().stream = "0x1";
  r.snap.streams[0].pending.insert(r.snap.streams[0].pending.begin(), op);
}

// Ranks 0-2 wait in the world AllReduce seq 5; rank 3 never called it and has nothing
// pending on the world communicator.
std::vector<FakeRank> worldWithRank3Behind() {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[3].snap.comms[0].last_issued_seq = 4;
  ranks[3].snap.comms[0].last_completed_seq = 4;
  ranks[3].snap.streams.clear();
  return ranks;
}

}  // namespace

TEST_CASE("ARankThatNeverCalledTheCollectiveBecauseItsGpuIsStuckOnAnotherCommunicatorIsNoHostHang") {
  // The verdict matrix (PAT, a dead link 2 -> 3 inside a tensor-parallel pair): rank 3's
  // GPU waits in the pair's ReduceScatter, its host waits for the GPU, and it never calls
  // the world AllReduce its peers wait in. That is no host code stuck: the hang is the ReduceScatter.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks = worldWithRank3Behind();
  onTensorParallel(ranks[2], 0, 2, 11, std::nullopt);      // finished it and went on
  onTensorParallel(ranks[3], 1, 2, 9, std::make_pair(9, 4.0));  // overdue: 4 s, timeout 3 s
  writeAll(ranks, dir.path);
  verdict_test::writeTrigger(dir.path, 1, 5);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind != VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.communicator == kTpComm);
  REQUIRE(r.verdict.op);
  CHECK(r.verdict.op->seq == 9);
  CHECK(mentions(r.verdict, "rank 3 never called ncclAllReduce seq 5"));
  CHECK(mentions(r.verdict, "its GPU has been in ncclReduceScatter seq 9"));
}

TEST_CASE("ARankBehindWhoseOtherCollectiveIsNotYetOverdueStaysWhereItIs") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 5);
  ranks[3].notInCollective(5, {"load_batch", "train_step", "main"});
  onTensorParallel(ranks[2], 0, 2, 11, std::nullopt);
  onTensorParallel(ranks[3], 1, 2, 9, std::make_pair(9, 1.0));  // 1 s: within its timeout
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{3});
}

TEST_CASE("CommunicatorsThatWaitOnEachOtherAreNamedAsSuchNotAsAHostHang") {
  // Rank 3 waits in the pair's ReduceScatter for rank 2, which never called it: rank 2 waits
  // in the world AllReduce for rank 3. Issue order or a fault: the ranks are suspects only.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks = worldWithRank3Behind();
  onTensorParallel(ranks[2], 0, 2, 8, std::nullopt);  // behind on the pair: never issued seq 9
  onTensorParallel(ranks[3], 1, 2, 9, std::make_pair(9, 4.0));
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(r.verdict.confident);
  CHECK(r.verdict.headline.find("Hang across communicators") != std::string::npos);
  std::set<int> suspects;
  for (const Suspect& s : r.verdict.suspects) suspects.insert(s.ranks.begin(), s.ranks.end());
  CHECK(suspects.count(2) == 1);
  CHECK(suspects.count(3) == 1);
}

TEST_CASE("JobDirectoryWithOnlyMetricsIsNoHang") {
  verdict_test::TempDir dir;
  (void)writeFileAtomically(metricsPath(dir.path, 0), "{}\n");
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kNoHang);
  CHECK(r.verdict.culprit_ranks.empty());
}

TEST_CASE("EmptyJobDirectoryIsInconclusiveWithTheReason") {
  verdict_test::TempDir dir;
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK(r.verdict.reason.find("no TRIGGER.json") != std::string::npos);
  CHECK_FALSE(r.verdict.confident);
}

TEST_CASE("EveryInconclusiveVerdictIsNotConfident") {
  verdict_test::TempDir empty, trigger_only, no_ring;
  verdict_test::writeTrigger(trigger_only.path, 1, 5);
  for (int r = 0; r < 4; ++r) FakeRank(r, 4, 9).write(no_ring.path);
  for (const std::string& dir : {empty.path, trigger_only.path, no_ring.path}) {
    Report r = reportOfDir(dir);
    INFO(dir);
    CHECK(r.verdict.kind == VerdictKind::kInconclusive);
    CHECK_FALSE(r.verdict.confident);
  }
}

TEST_CASE("ManualTriggerWithNothingPendingIsNoHang") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 5);
    ranks.back().snap.streams.clear();
    ranks.back().snap.comms[0].last_completed_seq = 5;
  }
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kNoHang);
}

TEST_CASE("SameCollectiveEverywhereWithoutRingProgressIsInconclusive") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 9);
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK(r.verdict.reason.find("no rank has ring progress") != std::string::npos);
  CHECK(r.verdict.culprit_ranks.empty());
}

TEST_CASE("TooFewRanksAnsweredIsInconclusiveAndSaysHowMany") {
  verdict_test::TempDir dir;
  auto [d, c] = deadLink(1);
  auto ranks = verdict_test::ringJob(8, 3, 2, d, c);
  for (int r : {0, 1, 2}) ranks[r].write(dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK(r.verdict.reason.find("3 of 8") != std::string::npos);
  CHECK(r.job.ranks_missing == std::vector<int>{3, 4, 5, 6, 7});
}

TEST_CASE("StackClassesGroupRanksAndTheOddOneOutIsAClassOfItsOwn") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 6; ++r) ranks.emplace_back(r, 6, 5);
  ranks[4].notInCollective(5, {"stall_in_host_loop", "train_step", "main"});
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  REQUIRE(r.stack_classes.size() == 2);
  CHECK(r.stack_classes[0].ranks.toString() == "0-3,5");
  CHECK(r.stack_classes[1].ranks.toString() == "4");
  CHECK(r.rank_class == std::vector<int>{0, 0, 0, 0, 1, 0});
}

TEST_CASE("RankBlockedInsideTheCollectiveCallIsNotBehind") {
  // The watchdog counts a collective as issued when its call returns; a dead device can keep
  // the call from returning, which must not read as "never called it".
  verdict_test::TempDir dir;
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 2 ? 0 : 3; };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return from == 1 ? 0 : 2; };
  auto ranks = verdict_test::ringJob(4, 10, 2, delivered, consumed, {2});
  ranks[2].notInCollective(10, {"blockOnDeadDevice", "ncclAllReduce", "main"});
  SnapshotHostCall h;
  h.call = "ncclAllReduce";
  h.comm = verdict_test::kComm;
  h.seq = 10;
  ranks[2].snap.host_calls.push_back(h);
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
  CHECK(mentions(r.verdict, "blocked inside the ncclAllReduce call"));
}

namespace {

// What a node peer writes for `rank` when it finds its process gone or stopped
// (watchdog/README.md); the caller says which.
RankState peerWrittenState(int rank) {
  RankState s;
  s.rank = rank;
  s.phase = DumpPhase::kDone;
  s.pid = 100 + rank;
  s.host = "node0";
  return s;
}

void writeState(const std::string& job_dir, const RankState& s) {
  REQUIRE(writeFileAtomically(rankStatePath(job_dir, s.rank), toJson(s).dump()).ok());
}

void writeExitedState(const std::string& job_dir, int rank, int seen_by) {
  RankState gone = peerWrittenState(rank);
  gone.exited_seen_by = seen_by;
  writeState(job_dir, gone);
}

// Ranks 0, 1 and 3 of 4 wait in ncclAllReduce seq 7 with no ring progress (collector off);
// rank 2 left no dump.
void writeAllButRankTwoWithoutRingProgress(const std::string& dir) {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 7);
  for (int r : {0, 1, 3}) {
    ranks[r].dump.ring_progress.clear();
    ranks[r].write(dir);
  }
}

}  // namespace

TEST_CASE("ARankThatNeverCallsInitIsNamedWhereTheOthersWaitInsideIt") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 1);
    if (r != 2) ranks[r].insideInit("00000000600dcafe", r, 4);
  }
  ranks[2].notInCollective(1, {"stall_in_sleep", "joinCommunicator", "main"});
  ranks[2].snap.comms.clear();
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
  CHECK(r.verdict.communicator == "00000000600dcafe");
  CHECK(mentions(r.verdict, "never called ncclCommInitRank for the 4-rank communicator"));
  CHECK(mentions(r.verdict, "stall_in_sleep"));
}

TEST_CASE("ASubCommunicatorThatNeverFormsNamesTheRankOutsideEverything") {
  // Tensor-parallel pairs made after the world communicator: rank 4 waits in its pair's init,
  // its partner 5 never came; the others went on into the world's next AllReduce. Rank 4 never
  // issued that AllReduce either, but it is inside an NCCL call, waiting: only 5 is in host code.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 8; ++r) ranks.emplace_back(r, 8, 3);
  ranks[4].notInCollective(3, {"bootstrapInit", "ncclCommInitRank", "main"});
  SnapshotHostCall h;
  h.call = "ncclCommInitRank";
  h.age_s = 3.5;
  h.joining = SnapshotJoining{"00000000000077aa", 0, 2};
  ranks[4].snap.host_calls.push_back(h);
  ranks[5].notInCollective(3, {"stall_in_host_loop", "main"});
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{5});
}

TEST_CASE("ARankThatJoinedWithAnIdNoRankMadeIsNamedNotTheRankWaitingForIt") {
  // A restarted torchrun job: rank 0 made this attempt's id and waits in it; rank 1 read the last
  // attempt's id from the agent's store and waits in that one. Rank 1 is the older in init.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back(r, 2, 1);
  ranks[0].insideInit("00000000000a77e1", 0, 2);
  ranks[0].snap.unique_ids_made = {"00000000000a77e1"};
  ranks[1].insideInit("0000000000057a1e", 1, 2);
  ranks[1].snap.host_calls[0].age_s = 9;
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{1});
  CHECK(r.verdict.communicator == "00000000000a77e1");
  CHECK(mentions(r.verdict, "no rank of this launch made that id"));
  CHECK(std::any_of(r.verdict.next_steps.begin(), r.verdict.next_steps.end(), [](const std::string& s) {
    return s.find("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1") != std::string::npos;
  }));

  // A process that made more ids than its snapshot keeps may have made the other one too.
  for (size_t i = 0; i < WatchdogSnapshot::kUniqueIdsKept; ++i)
    ranks[0].snap.unique_ids_made.push_back(fmt::format("{:016x}", 0xf000 + i));
  ranks[0].write(dir.path);
  CHECK_FALSE(reportOfDir(dir.path).verdict.confident);

  // Without rank 0's snapshot the other id's maker may be the silent rank: suspects only.
  std::filesystem::remove(watchdogSnapshotPath(dir.path, 0));
  std::filesystem::remove(forensicsDumpPath(dir.path, 0));
  Report unsure = reportOfDir(dir.path);
  CHECK_FALSE(unsure.verdict.confident);
  CHECK(unsure.verdict.culprit_ranks.empty());
}

TEST_CASE("ARankThatJoinedWithAnEarlierLaunchsIdIsNamedWhileItsPeerIsStillInPython") {
  // The restarted rank 1 read attempt restart-0's id; rank 0 has not reached init yet (still in
  // PyTorch's process-group setup), so no communicator of this launch is forming. Only the
  // earlier launch's snapshots tie rank 1's id to a launch that is gone.
  verdict_test::TempDir dir;
  const std::string earlier = dir.path + "/earlier", now = dir.path + "/now";
  FakeRank maker(0, 2, 1);
  maker.snap.unique_ids_made = {"0000000000057a1e"};
  maker.write(earlier);
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back(r, 2, 1);
  ranks[0].notInCollective(1, {"clock_nanosleep", "_create_nccl2_process_group", "init_process_group", "main"});
  ranks[0].snap.comms.clear();
  ranks[1].insideInit("0000000000057a1e", 1, 2);
  writeAll(ranks, now);

  Expected<JobData> job = JobLoader(2).load(now);
  REQUIRE(job.ok());
  CHECK(idsJoinedButNotMade(*job) == std::vector<std::string>{"0000000000057a1e"});
  // Without the earlier launch's word, rank 0 is the one outside the forming communicator.
  Report plain = ReportBuilder::build(JobData(*job));
  CHECK(plain.verdict.culprit_ranks == std::vector<int>{0});
  noteIdsMadeEarlier(*job, {{"restart-0", earlier}});
  REQUIRE(job->ids_made_earlier.count("0000000000057a1e"));
  CHECK(job->ids_made_earlier.at("0000000000057a1e").rank == 0);
  Report r = ReportBuilder::build(std::move(*job));
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{1});
  CHECK(mentions(r.verdict, "rank 0 of attempt restart-0, an earlier launch of this job, made it"));
  CHECK(mentions(r.verdict, "joined with the unique id of an earlier launch of this job"));
}

TEST_CASE("TwoPairsFormingAtOnceAreNotTakenForRanksWithAnotherId") {
  // Tensor-parallel pairs {0,1} and {2,3}, each with an id its first rank made: rank 0 waits for
  // 1 in the first, rank 3 for 2 in the second. Same size, disjoint positions, both ids made here:
  // no stray id, and ranks 1 and 2 are the ones outside.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 1);
  ranks[0].insideInit("00000000000000a1", 0, 2);
  ranks[0].snap.unique_ids_made = {"00000000000000a1"};
  ranks[3].insideInit("00000000000000b2", 1, 2);
  ranks[2].snap.unique_ids_made = {"00000000000000b2"};
  ranks[1].notInCollective(1, {"stall_in_host_loop", "main"});
  ranks[2].notInCollective(1, {"stall_in_host_loop", "main"});
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK_FALSE(mentions(r.verdict, "no rank of this launch made"));
  for (int stray : r.verdict.culprit_ranks) CHECK((stray == 1 || stray == 2));
}

TEST_CASE("EveryMemberInsideInitIsInconclusiveWithoutACulprit") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back(r, 3, 1);
    ranks[r].insideInit("00000000600dcafe", r, 3);
  }
  writeAll(ranks, dir.path);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK(r.verdict.culprit_ranks.empty());
  CHECK(mentions(r.verdict, "every member of the 3-rank communicator"));
}

TEST_CASE("ARankWhoseProcessDiedBeforeInitIsNamedFromItsNodePeer") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back(r, 4, 1);
    ranks[r].insideInit("00000000600dcafe", r, 4);
  }
  for (int r : {0, 1, 3}) ranks[r].write(dir.path);
  writeExitedState(dir.path, 2, 3);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
  CHECK(mentions(r.verdict, "had exited when rank 3 of its node dumped"));
}

TEST_CASE("AMemberWhoseProcessDiedInsideTheCollectiveIsItsCulprit") {
  // No debugger ran (collector off): nothing but the node peer's word places rank 2.
  verdict_test::TempDir dir;
  writeAllButRankTwoWithoutRingProgress(dir.path);
  writeExitedState(dir.path, 2, 1);
  Report r = reportOfDir(dir.path);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
  CHECK(mentions(r.verdict, "rank(s) 2 exited; the others wait for it in ncclAllReduce"));
  // Without the node peer's word it is a rank that left no dump: not confident.
  std::filesystem::remove(rankStatePath(dir.path, 2));
  Report unsure = reportOfDir(dir.path);
  CHECK_FALSE(unsure.verdict.confident);
}

TEST_CASE("AMemberThatEndedOnTheLaunchersSigtermWithNothingPendingIsNotNamed") {
  // torchrun and srun --kill-on-bad-exit end every rank once one failed: one that passed the
  // SIGTERM on with no GPU communication pending went because of the failure. Not confident.
  verdict_test::TempDir dir;
  writeAllButRankTwoWithoutRingProgress(dir.path);
  RankState gone = peerWrittenState(2);
  gone.exited_seen_by = 1;
  gone.exited_on_term = true;
  writeState(dir.path, gone);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK_FALSE(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks.empty());
  CHECK(std::any_of(r.job.problems.begin(), r.job.problems.end(), [](const std::string& p) {
    return p.find("had ended on the launcher's SIGTERM (nothing pending)") != std::string::npos;
  }));
}

TEST_CASE("AMemberFrozenInsideTheCollectiveIsItsCulpritWithItsGpuAndHowToContinueIt") {
  // Its node peer found it stopped (state T) and wrote its state with the device the board knew.
  verdict_test::TempDir dir;
  writeAllButRankTwoWithoutRingProgress(dir.path);
  RankState frozen = peerWrittenState(2);
  frozen.pid = 4321;
  frozen.host = "node1";
  frozen.device = 5;
  frozen.stopped_seen_by = 3;
  writeState(dir.path, frozen);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
  CHECK(mentions(r.verdict, "rank(s) 2 frozen (process stopped)"));
  CHECK(mentions(r.verdict, "(pid 4321 on GPU 5 on host node1) was stopped"));
  CHECK(std::any_of(r.verdict.next_steps.begin(), r.verdict.next_steps.end(),
                    [](const std::string& s) { return s.find("kill -CONT 4321") != std::string::npos; }));
  CHECK_FALSE(std::any_of(r.verdict.next_steps.begin(), r.verdict.next_steps.end(),
                          [](const std::string& s) { return s.find("died") != std::string::npos; }));
}

TEST_CASE("ARankFrozenThenContinuedThatDumpedItselfIsNamedFrozenAsItsNodePeerSawIt") {
  // Rank 3's ring links stopped (its own dump and its neighbours' say so); its node peer had
  // found its process stopped, and its own watchdog kept that in its state once continued.
  verdict_test::TempDir dir;
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 3 ? 40 : 47; };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return from == 2 ? 40 : 45; };
  writeAll(verdict_test::ringJob(4, 7, 2, delivered, consumed, {3}), dir.path);
  RankState own = peerWrittenState(3);
  own.pid = 4321;
  own.snapshot = "written";
  own.forensics = "written";
  own.stopped_seen_by = 2;
  writeState(dir.path, own);
  Report r = reportOfDir(dir.path);
  INFO(r.verdict.headline);
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.confident);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{3});
  CHECK(mentions(r.verdict, "Rank 3's process had been frozen (stopped)."));
  CHECK(mentions(r.verdict, "(pid 4321 on GPU 3 on host node0) was stopped"));
  REQUIRE_FALSE(r.verdict.next_steps.empty());
  CHECK(r.verdict.next_steps.front().find("kill -CONT 4321") != std::string::npos);

  // A rank seen stopped that is not the culprit is told, and the verdict's words stay its own.
  own.rank = 1;
  writeState(dir.path, own);
  std::filesystem::remove(rankStatePath(dir.path, 3));
  Report other = reportOfDir(dir.path);
  CHECK(other.verdict.culprit_ranks == std::vector<int>{3});
  CHECK(mentions(other.verdict, "Rank 1's process (pid 4321"));
  CHECK(other.verdict.headline.find("frozen") == std::string::npos);
}

TEST_CASE("ARankWithoutADumpIsPlacedOnItsHostAndGpuByItsLastMetricsWindow") {
  // Rank 2 died alone on its node (nobody wrote its state) after writing metrics windows.
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.emplace_back(r, 4, 7);
  for (int r : {0, 1, 3}) ranks[r].write(dir.path);
  std::filesystem::create_directories(metricsDir(dir.path));
  std::ofstream out(metricsPath(dir.path, 2));
  MetricsWindow w;
  w.rank = 2;
  w.host = "node-b";
  w.pid = 777;
  for (int device : {1, 6}) {  // the last window is the one read
    w.device = device;
    out << toJson(w).dump() << "\n";
  }
  out << R"({"v":1,"rank":2,"ho)";  // a window torn by the kill
  out.close();
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  CHECK(describeRank(*job, 2) == "rank 2 (no dump, host node-b, GPU 6, pid 777; where it ran from its metrics)");
  Report r = ReportBuilder::build(std::move(*job));
  INFO(r.verdict.headline);
  // Hedged (no ring progress here), but the operator is sent to the right host and GPU.
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
  CHECK(std::any_of(r.verdict.next_steps.begin(), r.verdict.next_steps.end(), [](const std::string& s) {
    return s.find("Look at rank 2 (no dump, host node-b, GPU 6, pid 777") != std::string::npos;
  }));
}
