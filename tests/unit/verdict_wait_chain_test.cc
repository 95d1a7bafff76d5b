// The waits across communicators and transfers (wait_chain.h), on pipeline-shaped jobs:
// 4 ranks as 2 stages x 2 tensor-parallel ranks (ring_train --pp 2 --tp 2), stage 0 = ranks
// 0-1, stage 1 = ranks 2-3; each stage's TP communicator, and one pipeline communicator per
// TP position ({0, 2} and {1, 3}) that the stages' sends and receives run on.
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

const std::string kTp0 = "7e00000000000000";  // ranks 0, 1
const std::string kTp1 = "7e00000000000001";  // ranks 2, 3
const std::string kPp0 = "9900000000000000";  // ranks 0 (stage 0), 2 (stage 1)
const std::string kPp1 = "9900000000000001";  // ranks 1, 3

// Rank `rank` of the pipeline job with its communicators and nothing pending; the TP
// communicator has issued and completed `tp_done` collectives.
FakeRank pipeRank(int rank, uint64_t tp_done) {
  FakeRank r(rank, 4, 1);
  r.snap.comms.clear();
  r.snap.streams.clear();
  r.snap.streams.push_back({"0x1", 0, {}});
  const auto add = [&](const std::string& hash, int comm_rank, std::optional<uint64_t> done) {
    SnapshotComm c;
    c.hash = hash;
    c.rank = comm_rank;
    c.size = 2;
    c.state = "live";
    c.last_issued_seq = done;
    c.last_completed_seq = done;
    r.snap.comms.push_back(c);
  };
  add(rank < 2 ? kTp0 : kTp1, rank % 2, tp_done);
  add(rank % 2 == 0 ? kPp0 : kPp1, rank / 2, std::nullopt);
  return r;
}

// What the rank issued to its pipeline neighbour (the other stage): sends and receives.
void talked(FakeRank& r, uint64_t sends, uint64_t receives) {
  const int rank = *r.snap.identity.rank;
  for (SnapshotComm& c : r.snap.comms)
    if (c.hash == (rank % 2 == 0 ? kPp0 : kPp1)) c.p2p = {{1 - c.rank, sends, receives}};
}

// What each rank issued to its pipeline neighbour: {sends, receives} of ranks 0..3.
void talkedEach(std::vector<FakeRank>& ranks, const std::vector<std::pair<uint64_t, uint64_t>>& counts) {
  for (size_t r = 0; r < counts.size(); ++r) talked(ranks[r], counts[r].first, counts[r].second);
}

// An operation on the rank's stream, after those already there; `started`: the GPU reached it.
void queue(FakeRank& r, const std::string& op, const std::string& comm, std::optional<uint64_t> seq,
           std::optional<int> peer, bool started) {
  SnapshotPendingOp p;
  p.op = op;
  p.op_class = seq ? "collective" : "p2p";
  p.comm = comm;
  p.seq = seq;
  p.peer = peer;
  p.count = 4096;
  p.dtype = "float32";
  p.gpu_started = started;
  p.age_s = started ? 4.0 : 0.0;
  p.issued_s_ago = 4.1;
  r.snap.streams[0].pending.push_back(p);
  if (seq) {
    for (SnapshotComm& c : r.snap.comms)
      if (c.hash == comm) c.last_issued_seq = std::max(c.last_issued_seq.value_or(0), *seq);
  }
}

// Link 0 -> 2 (stage 0 -> stage 1) stopped: rank 0's send and rank 2's receive both run. Rank
// 1's send to 3 went through; rank 1 then waits in TP collective 8 for rank 0, and rank 3 in TP
// collective 6 for rank 2.
std::vector<FakeRank> deadLinkBetweenStages() {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, r < 2 ? 7 : 5));
  queue(ranks[0], "ncclSend", kPp0, std::nullopt, 1, true);
  queue(ranks[0], "ncclAllReduce", kTp0, 8, std::nullopt, false);
  queue(ranks[1], "ncclAllReduce", kTp0, 8, std::nullopt, true);
  queue(ranks[2], "ncclRecv", kPp0, std::nullopt, 0, true);
  queue(ranks[2], "ncclAllReduce", kTp1, 6, std::nullopt, false);
  queue(ranks[3], "ncclAllReduce", kTp1, 6, std::nullopt, true);
  return ranks;
}

void writeTrigger(const std::string& dir, int rank, const std::string& op, const std::string& comm,
                  std::optional<uint64_t> seq, std::optional<int> peer) {
  TriggerRecord t;
  t.rank = rank;
  t.host = "node0";
  t.pid = 100 + rank;
  t.time_unix_s = 1000.0;
  t.reason = "timeout";
  StuckOp s;
  s.op = op;
  s.comm = comm;
  s.seq = seq;
  s.peer = peer;
  s.age_s = 3.2;
  t.stuck_op = s;
  (void)writeFileAtomically(triggerPath(dir), toJson(t).dump());
}

Verdict verdictOf(const std::vector<FakeRank>& ranks, int trigger_rank, const std::string& op, const std::string& comm,
                  std::optional<uint64_t> seq, std::optional<int> peer = std::nullopt) {
  verdict_test::TempDir dir;
  for (const FakeRank& r : ranks) r.write(dir.path);
  writeTrigger(dir.path, trigger_rank, op, comm, seq, peer);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job)).verdict;
}

bool saysSomewhere(const Verdict& v, const std::string& text) {
  if (v.headline.find(text) != std::string::npos) return true;
  for (const std::string& e : v.evidence)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("AStagesRankStuckInHostCodeIsNamedThroughTheTransfersAndCollectivesThatWaitOnIt") {
  // Rank 3 stopped in host code after its TP collective 5. Rank 2 waits in TP collective 6
  // for it. Stage 0 ranks send their activations to stage 1, whose receives are queued behind
  // that collective; their own next TP collective (8) is queued behind the sends.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, r < 2 ? 7 : 5));
  for (int r = 0; r < 2; ++r) {
    queue(ranks[r], "ncclSend", r == 0 ? kPp0 : kPp1, std::nullopt, 1, true);
    queue(ranks[r], "ncclAllReduce", kTp0, 8, std::nullopt, false);
  }
  queue(ranks[2], "ncclAllReduce", kTp1, 6, std::nullopt, true);
  queue(ranks[2], "ncclRecv", kPp0, std::nullopt, 0, false);
  ranks[3].dump.threads[0] = verdict_test::thread(103, "ring_train", {"stall_in_host_loop", "step", "main"});

  // The first to time out is a stage-0 rank, in the TP collective its stream has not reached.
  const Verdict v = verdictOf(ranks, 0, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.communicator == kTp1);
  // Each hop is said: what rank 0's stream runs first, and who that waits on.
  CHECK(saysSomewhere(v, "rank 0 has ncclAllReduce seq 8 on communicator " + kTp0 + " queued behind work"));
  CHECK(saysSomewhere(v, "ncclSend to rank 2 on communicator " + kPp0));
  CHECK(saysSomewhere(v, "rank 2 is not in the receive from rank 0"));
}

TEST_CASE("ASendAndItsReceiveBothRunningInsideANodeLeaveTheirLinkTheOneSuspect") {
  // Link 0 -> 2 (stage 0 -> stage 1) stopped: rank 0's send and rank 2's receive both run.
  // Rank 1's send to 3 went through; rank 1 then waits in TP collective 8 for rank 0, and rank 3
  // in TP collective 6 for rank 2. The snapshots hold no proxy steps (links inside a node).
  std::vector<FakeRank> ranks = deadLinkBetweenStages();

  const Verdict v = verdictOf(ranks, 1, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  REQUIRE(v.suspects.size() == 1);
  REQUIRE(v.suspects[0].link);
  CHECK(v.suspects[0].link->from == 0);
  CHECK(v.suspects[0].link->to == 2);
  CHECK(saysSomewhere(v, "rank 0's send to rank 2 and rank 2's receive from rank 0 both run"));
}

TEST_CASE("ASendWhosePeerRunsNothingNamesThePeerInHostCode") {
  // Two stages, nothing else: rank 0's send to rank 2 waits; rank 2 runs nothing on its GPU
  // and is in host code. No collective is pending anywhere.
  std::vector<FakeRank> ranks;
  for (int r : {0, 2}) ranks.push_back(pipeRank(r, 7));
  queue(ranks[0], "ncclSend", kPp0, std::nullopt, 1, true);
  queue(ranks[0], "ncclRecv", kPp0, std::nullopt, 1, false);
  ranks[1].dump.threads[0] = verdict_test::thread(102, "ring_train", {"stall_in_host_loop", "step", "main"});
  for (FakeRank& r : ranks) r.snap.identity.world_size = 2;

  const Verdict v = verdictOf(ranks, 0, "ncclSend", kPp0, std::nullopt, 1);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{2});
  CHECK(v.communicator == kPp0);
  CHECK(saysSomewhere(v, "rank 2 never posted the receive from rank 0"));
}

TEST_CASE("ACollectiveEveryMemberRunsStaysTheFocusWhateverIsQueuedBehindIt") {
  // Both TP ranks of stage 0 run TP collective 8; sends are queued behind it. Nothing moves
  // the focus: the ring-progress rules decide there (here with no records: inconclusive).
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(pipeRank(r, 7));
    queue(ranks.back(), "ncclAllReduce", kTp0, 8, std::nullopt, true);
    queue(ranks.back(), "ncclSend", r == 0 ? kPp0 : kPp1, std::nullopt, 1, false);
  }
  for (int r = 2; r < 4; ++r) {
    ranks.push_back(pipeRank(r, 5));
    queue(ranks.back(), "ncclRecv", r == 2 ? kPp0 : kPp1, std::nullopt, 0, true);
  }
  const Verdict v = verdictOf(ranks, 0, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  REQUIRE(v.op);
  CHECK(v.op->seq == std::optional<uint64_t>{8});
  CHECK(v.communicator == kTp0);
  CHECK_FALSE(saysSomewhere(v, "queued behind"));
}

TEST_CASE("AStageThatRanOneMicroBatchFewerIsNamedWithWhatEachSideIssued") {
  // Stage 1 (ranks 2, 3: one tensor-parallel group, one schedule) ran one micro-batch fewer at
  // some step: it sent 15 gradients back where stage 0 posted 16 receives, and finished. Stage
  // 0's ranks wait in their 16th receive; stage 1 runs nothing.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, 7));
  for (int r = 0; r < 2; ++r) {
    queue(ranks[r], "ncclRecv", r == 0 ? kPp0 : kPp1, std::nullopt, 1, true);
    queue(ranks[r], "ncclAllReduce", kTp0, 8, std::nullopt, false);
    talked(ranks[r], 16, 16);
  }
  for (int r = 2; r < 4; ++r) talked(ranks[r], 15, 16);

  const Verdict v = verdictOf(ranks, 0, "ncclRecv", kPp0, std::nullopt, 1);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{2, 3});
  CHECK(saysSomewhere(v, "Rank 0 issued 16 receives from rank 2; rank 2 issued 15 sends to rank 0: 1 never issued"));
  CHECK(saysSomewhere(v, "Rank 1 issued 16 receives from rank 3; rank 3 issued 15 sends to rank 1"));
  // Each culprit placed in its stage, from the communicators it sent and received on.
  REQUIRE(v.places.size() == 2);
  CHECK(v.places[0].rank == 2);
  CHECK(v.places[0].stage == 1);
  CHECK(v.places[0].stages == 2);
  CHECK(v.places[0].stage_ranks == std::vector<int>{2, 3});
  CHECK(v.places[0].groups == std::vector<std::vector<int>>{{2, 3}});
  CHECK(saysSomewhere(v, "Rank 2 is in pipeline stage 1 of 2 (ranks 2-3), and in the groups of ranks 2-3"));
}

TEST_CASE("ALinkBetweenTwoStagesIsSaidAsSuch") {
  // As the inconclusive link case above, with the transfers counted: the suspect link's ends
  // are in stages 0 and 1.
  std::vector<FakeRank> ranks = deadLinkBetweenStages();
  for (FakeRank& r : ranks) talked(r, 9, 9);  // a dead link: both ends issued the transfer they wait in

  const Verdict v = verdictOf(ranks, 1, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  REQUIRE(v.places.size() == 2);
  CHECK(v.places[0].stage == 0);
  CHECK(v.places[1].stage == 1);
  CHECK(
      saysSomewhere(v, "The link 0 -> 2 joins pipeline stage 0 of 2 (ranks 0-1) to pipeline stage 1 of 2 (ranks 2-3)"));
}

TEST_CASE("ARankThatTalksToNoNeighbourHasNoStage") {
  // Transfers to a peer two comm ranks away (an all-to-all, a ring's wrap) are no pipeline.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, 7));
  ranks[3].notInCollective(8, {"stall_in_host_loop", "main"});
  for (int r = 0; r < 3; ++r) queue(ranks[r], "ncclAllReduce", kTp0, 8, std::nullopt, true);
  for (FakeRank& r : ranks)
    for (SnapshotComm& c : r.snap.comms) c.p2p = {{c.rank + 2, 4, 4}};
  const Verdict v = verdictOf(ranks, 0, "ncclAllReduce", kTp0, 8);
  CHECK(v.places.empty());
}

TEST_CASE("APeerThatWaitsOnAnotherPeerIsFollowedNotTakenForTheOtherEndOfTheLink") {
  // Three stages on one pipeline communicator. Stage 2 waits to receive from stage 1; stage 1
  // has its send to stage 2 queued in a group behind a receive from stage 0, which its GPU runs;
  // stage 0 loops in host code. The link 1 -> 2 is not where the waits end.
  const std::string pipe = "9900000000000002";
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back(r, 3, 1);
    FakeRank& f = ranks.back();
    f.snap.comms.clear();
    SnapshotComm c;
    c.hash = pipe;
    c.rank = r;
    c.size = 3;
    c.state = "live";
    f.snap.comms.push_back(c);
    f.snap.streams.clear();
    f.snap.streams.push_back({"0x1", 0, {}});
  }
  queue(ranks[1], "ncclRecv", pipe, std::nullopt, 0, true);
  queue(ranks[1], "ncclSend", pipe, std::nullopt, 2, false);
  queue(ranks[2], "ncclRecv", pipe, std::nullopt, 1, true);
  ranks[2].snap.streams[0].pending[0].age_s = 5.0;  // the oldest: where the walk starts
  ranks[0].dump.threads[0] = verdict_test::thread(100, "ring_train", {"stall_in_host_loop", "step", "main"});

  const Verdict v = verdictOf(ranks, 2, "ncclRecv", pipe, std::nullopt, 1);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{0});
  CHECK(saysSomewhere(v, "rank 1 is not in the send to rank 2 that this needs: its GPU runs ncclRecv from rank 0"));
}

// Ranks 0-3 as above, each running a group with its pipeline peer (stage 0 sends, stage 1
// receives), and what each issued to it: a dead link leaves the counts equal, a schedule that
// differs does not.
std::vector<FakeRank> exchangingPairs(uint64_t stage0_count, uint64_t stage1_count, uint64_t partner_count) {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, 7));
  for (int r : {0, 1}) {
    queue(ranks[r], "ncclSend", r == 0 ? kPp0 : kPp1, std::nullopt, 1, true);
    queue(ranks[r], "ncclRecv", r == 0 ? kPp0 : kPp1, std::nullopt, 1, false);
  }
  // Stage 1's next send to stage 0 is queued behind its receive, and so is the one after it:
  // stage 0's group waits for data stage 1 has not sent yet (it never will: it waits first).
  for (int r : {2, 3}) {
    queue(ranks[r], "ncclRecv", r == 2 ? kPp0 : kPp1, std::nullopt, 0, true);
    queue(ranks[r], "ncclSend", r == 2 ? kPp0 : kPp1, std::nullopt, 0, false);
    queue(ranks[r], "ncclSend", r == 2 ? kPp0 : kPp1, std::nullopt, 0, false);
  }
  ranks[2].snap.streams[0].pending[0].age_s = 5.0;  // the walk starts at rank 2
  talked(ranks[0], stage0_count, stage0_count);
  talked(ranks[2], stage1_count, stage1_count);
  talked(ranks[1], partner_count, partner_count);
  talked(ranks[3], stage1_count, stage1_count);
  return ranks;
}

TEST_CASE("TwoEndsThatIssuedDifferentCountsAreATransferMismatchNamingTheOddOneByTheUsualCount") {
  // Rank 0 issued 15 to its peer where rank 2, and the other pair, issued 16: rank 0 ran one
  // micro-batch fewer. Its TP peer, rank 1, holds the same odd count on its own pair.
  std::vector<FakeRank> ranks = exchangingPairs(15, 16, 16);
  // Make 16 the usual count: a third pair's worth of records.
  for (FakeRank& r : ranks)
    if (*r.snap.identity.rank == 3) r.snap.comms[0].p2p = {{5, 16, 16}};
  Verdict v = verdictOf(ranks, 2, "ncclRecv", kPp0, std::nullopt, 0);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{0});
  CHECK(saysSomewhere(v, "Rank 0 issued 15 sends to rank 2; rank 2 posted 16 receives from rank 0."));
  CHECK(saysSomewhere(v, "No link lost them"));

  // The TP peer short the same way is named with it.
  ranks = exchangingPairs(15, 16, 15);
  for (FakeRank& r : ranks)
    if (*r.snap.identity.rank == 3) r.snap.comms[0].p2p = {{5, 16, 16}};
  v = verdictOf(ranks, 2, "ncclRecv", kPp0, std::nullopt, 0);
  INFO(v.headline);
  CHECK(v.culprit_ranks == std::vector<int>{0, 1});
}

TEST_CASE("ATransferMismatchWithNoUsualCountHedgesBetweenTheTwoEnds") {
  // Half the records say 15, half 16: nothing says which stage's schedule is the odd one.
  const Verdict v = verdictOf(exchangingPairs(15, 16, 15), 2, "ncclRecv", kPp0, std::nullopt, 0);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  std::vector<int> suspects;
  for (const Suspect& s : v.suspects) suspects.insert(suspects.end(), s.ranks.begin(), s.ranks.end());
  std::sort(suspects.begin(), suspects.end());
  CHECK(suspects == std::vector<int>{0, 2});
}

namespace {

// Link 2 -> 0 dropped what rank 2 sent: rank 2's sends completed into rank 0's buffers and
// rank 2 went on into the next step (8 transfers each way) while rank 0 still runs the group of
// its 4th send and its 1st receive of the step (4 each way).
std::vector<FakeRank> lostInTransitJob() {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, 7));
  queue(ranks[0], "ncclSend", kPp0, std::nullopt, 1, true);
  for (int i = 0; i < 4; ++i) queue(ranks[0], "ncclRecv", kPp0, std::nullopt, 1, false);
  queue(ranks[2], "ncclRecv", kPp0, std::nullopt, 0, true);
  for (int i = 0; i < 3; ++i) queue(ranks[2], "ncclRecv", kPp0, std::nullopt, 0, false);
  for (int i = 0; i < 4; ++i) queue(ranks[2], "ncclSend", kPp0, std::nullopt, 0, false);
  ranks[0].snap.streams[0].pending[0].age_s = 5.0;  // the walk starts at rank 0
  talkedEach(ranks, {{4, 4}, {8, 8}, {8, 8}, {8, 8}});
  return ranks;
}

}  // namespace

TEST_CASE("DataThatLeftItsSenderAndNeverArrivedIsTheLinkNotATransferMismatch") {
  // Counts differ, as in a schedule mismatch, but every half rank 0's group waits for was done
  // by rank 2.
  const Verdict v = verdictOf(lostInTransitJob(), 0, "ncclSend", kPp0, std::nullopt, 1);
  INFO(v.headline);
  for (const std::string& e : v.evidence) INFO(e);
  CHECK(v.kind != VerdictKind::kCollectiveMismatch);
  CHECK(v.culprit_ranks.empty());
  CHECK_FALSE(v.confident);
  REQUIRE_FALSE(v.suspects.empty());
  REQUIRE(v.suspects[0].link.has_value());
  CHECK(std::make_pair(v.suspects[0].link->from, v.suspects[0].link->to) == std::make_pair(2, 0));
  CHECK(saysSomewhere(v, "Rank 2 completed 4 sends to rank 0; rank 0 completed 0 receives from rank 2"));
  CHECK(saysSomewhere(v, "never arrived"));
}

TEST_CASE("ATransferWhoseHalfItsPeerDidOnlyWaitsInItsGroupAndNamesNoHostCode") {
  // A ring exchange (device_ring: each rank sends to its next and receives from its prev in one
  // group) whose link 1 -> 2 stopped: every rank's group finished but rank 2's, whose send to 3
  // is pending only because a group is one kernel. Rank 3 runs nothing, but its counts say it
  // posted (and completed) its receive from 2: it is no rank in host code.
  const std::string ring = "5a00000000000000";
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) {
    FakeRank f(r, 4, 1);
    f.snap.comms[0].hash = ring;
    f.snap.comms[0].last_issued_seq = std::nullopt;
    f.snap.comms[0].last_completed_seq = std::nullopt;
    f.snap.comms[0].p2p = {{(r + 1) % 4, 1, 0}, {(r + 3) % 4, 0, 1}};
    f.snap.streams[0].pending.clear();
    ranks.push_back(f);
  }
  queue(ranks[2], "ncclSend", ring, std::nullopt, 3, true);
  queue(ranks[2], "ncclRecv", ring, std::nullopt, 1, false);
  const Verdict v = verdictOf(ranks, 2, "ncclSend", ring, std::nullopt, 3);
  INFO(v.headline);
  for (const std::string& e : v.evidence) INFO(e);
  CHECK(v.kind != VerdictKind::kNonCommunicationHang);
  CHECK(std::find(v.culprit_ranks.begin(), v.culprit_ranks.end(), 3) == v.culprit_ranks.end());
  CHECK_FALSE(v.confident);
  const bool link_suspect = std::any_of(v.suspects.begin(), v.suspects.end(), [](const Suspect& s) {
    return s.link && s.link->from == 1 && s.link->to == 2;
  });
  CHECK(link_suspect);
  CHECK(v.places.empty());  // a ring exchange's middle ranks are no pipeline stages
}

TEST_CASE("AGroupWhoseFirstHalfItsPeerDidWaitsForTheNextOneThePeerNeverPosted") {
  // pp-skip as the campaign ran it: rank 1 (stage 0) ran one micro-batch fewer and went on to
  // its step's barrier (host code, nothing on its GPU). Rank 3 (stage 1) runs the group of its
  // 71st send to rank 1 (which rank 1 received: 71 receives issued and done) and its 72nd
  // receive from rank 1, which rank 1 never sent (71 sends). The group waits for that receive.
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(pipeRank(r, 7));
  queue(ranks[3], "ncclSend", kPp1, std::nullopt, 0, true);
  queue(ranks[3], "ncclRecv", kPp1, std::nullopt, 0, false);
  queue(ranks[3], "ncclSend", kPp1, std::nullopt, 0, false);
  talkedEach(ranks, {{72, 72}, {71, 71}, {72, 72}, {72, 72}});
  const Verdict v = verdictOf(ranks, 3, "ncclSend", kPp1, std::nullopt, 0);
  INFO(v.headline);
  for (const std::string& e : v.evidence) INFO(e);
  CHECK(v.kind == VerdictKind::kNonCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{1});
  CHECK(v.headline.find("rank 1 never posted the send to rank 3") != std::string::npos);
}

namespace {

// lostInTransitJob, and the debugger read rank 0's thread polling the connection from rank 2 (comm rank 1 of kPp0) with
// its tail at `observed`, needing `target`.
std::vector<FakeRank> lostWithReceiverRead(uint64_t observed, uint64_t target) {
  std::vector<FakeRank> ranks = lostInTransitJob();
  RingProgress r;
  r.comm = kPp0;
  r.op = "ncclRecv";
  r.seq_known = false;
  r.channel = 0;
  r.rank = 0;
  r.source = "sim-frame";
  RingConnection c = FakeRank::connection(1, target, observed);
  c.direction = "recv";
  c.role = "p2p";
  r.connections.push_back(c);
  ranks[0].dump.ring_progress.push_back(r);
  return ranks;
}

}  // namespace

TEST_CASE("DataLostInTransitIsTheLinkWhenTheDebuggerSawTheReceivingGpuWaitForIt") {
  const Verdict v = verdictOf(lostWithReceiverRead(6, 7), 0, "ncclSend", kPp0, std::nullopt, 1);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.confident);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{2, 0});
  CHECK(v.source == "debugger");
  CHECK(saysSomewhere(v, "rank 0's GPU waits for that data"));

  // Its tail at the step it needs: the data came and the GPU did not take it. Not the link's
  // alone: the hedge stays.
  const Verdict u = verdictOf(lostWithReceiverRead(7, 7), 0, "ncclSend", kPp0, std::nullopt, 1);
  CHECK_FALSE(u.confident);
  CHECK_FALSE(u.culprit_link);
}

TEST_CASE("DataLostInTransitIsTheLinkWhenCudaGdbSawTheReceivingGpusSendRecvBlockWaitForIt") {
  // The record as the cuda-gdb reader writes it: NCCL's id of the communicator only (no
  // watchdog hash), NCCL's SendRecv kernel, the connection its thread polls found by address.
  std::vector<FakeRank> ranks = lostWithReceiverRead(6, 7);
  for (SnapshotComm& c : ranks[0].snap.comms)
    if (c.hash == kPp0) c.nccl_id = "00000000000000a0";
  RingProgress& r = ranks[0].dump.ring_progress.back();
  r.comm.clear();
  r.nccl_comm = "00000000000000a0";
  r.op = "ncclSendRecv";
  r.source = "cuda-registers";
  r.algorithm = "RING";
  const Verdict v = verdictOf(ranks, 0, "ncclSend", kPp0, std::nullopt, 1);
  INFO(v.headline);
  CHECK(v.confident);
  REQUIRE(v.culprit_link);
  CHECK(*v.culprit_link == Link{2, 0});
  CHECK(saysSomewhere(v, "rank 0's GPU waits for that data"));
}

namespace {

// Rank 3 left no file at all (its process ended; nobody on its node to say so). Rank 1's send
// to it on {1, 3} runs, with its TP collective 8 queued behind; rank 0 waits in that collective,
// rank 2 in TP collective 6 with rank 3. `without`: further ranks that left nothing.
std::vector<FakeRank> stagePeerLeftNothing(const std::vector<int>& without = {}) {
  std::vector<FakeRank> ranks;
  for (int r = 0; r < 3; ++r)
    if (!std::count(without.begin(), without.end(), r)) ranks.push_back(pipeRank(r, r < 2 ? 7 : 5));
  for (FakeRank& r : ranks) {
    const int rank = *r.snap.identity.rank;
    if (rank == 0) queue(r, "ncclAllReduce", kTp0, 8, std::nullopt, true);
    if (rank == 1) queue(r, "ncclSend", kPp1, std::nullopt, 1, true);
    if (rank == 1) queue(r, "ncclAllReduce", kTp0, 8, std::nullopt, false);
    if (rank == 2) queue(r, "ncclAllReduce", kTp1, 6, std::nullopt, true);
  }
  return ranks;
}

}  // namespace

TEST_CASE("ATransferWhosePeerLeftNoFileMakesThePeerTheSuspectNotTheRanksThatWaitOnIt") {
  // No snapshot names {1, 3}'s rank 1; rank 3 is the one rank of the job without one, so it is
  // that member. Nothing says why it is silent: a hedge with rank 3 its one suspect.
  const Verdict v = verdictOf(stagePeerLeftNothing(), 0, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  CHECK(v.communicator == kPp1);
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{3});
  CHECK(saysSomewhere(v, "rank 1's ncclSend to rank 3 on communicator " + kPp1 + " waits, and rank 3 left no file"));
  CHECK(saysSomewhere(v, "queued behind work its GPU runs"));
}

TEST_CASE("ATransferWhosePeerLeftNoFileIsNamedWhenNcclsRasListsThePeerMissing") {
  // Rank 0's collector asked RAS, whose answer has every process's communicators: {1, 3}, of
  // which rank 0 is no member, with its rank 1 (pid 103) unanswering.
  std::vector<FakeRank> ranks = stagePeerLeftNothing();
  for (SnapshotComm& c : ranks[1].snap.comms)
    if (c.hash == kPp1) c.nccl_id = "00000000000b1313";
  RasStatus ras;
  ras.address = "localhost:28028";
  ras.asked_by = "collector";
  RasComm pp{"0xb1313", 2, {}, {}};
  pp.ranks.push_back(RasMember{0, "node0", 101, 1, false, false});
  pp.missing.push_back(RasMember{1, "node1", 103, 3, true, false});
  ras.communicators = {pp};
  ranks[0].dump.ras = ras;

  const Verdict v = verdictOf(ranks, 0, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.communicator == kPp1);
  REQUIRE(v.op);
  CHECK_FALSE(v.op->seq.has_value());
  CHECK(saysSomewhere(v, "rank 3 does not answer"));
  CHECK(saysSomewhere(v, "lists rank 1 of communicator " + kPp1 + " (rank 3 of the job) missing"));
}

TEST_CASE("APeerWhoseGlobalRankTwoSilentRanksCouldBeIsNotNamed") {
  // Ranks 2 and 3 both left nothing: {1, 3}'s rank 1 is one of them, and which is not known.
  // Not taken for rank 1 (its comm rank), and no rank is named.
  const Verdict v = verdictOf(stagePeerLeftNothing({2}), 0, "ncclAllReduce", kTp0, 8);
  INFO(v.headline);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  for (const Suspect& s : v.suspects) CHECK(s.ranks != std::vector<int>{1});
}

namespace {

// Ranks 0 and 2 of a data-parallel job (the world communicator, its transfers on it as
// PyTorch's batched sends run): rank 0's send to rank 1 runs with the world collective 9 queued
// behind it; rank 2 waits in 9. Rank 1's process is gone, as rank 0 of its node saw (`on_term`:
// it ended on a SIGTERM it passed on with nothing pending); rank 3 left nothing.
Verdict tornDownJob(bool on_term) {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks{FakeRank(0, 4, 9), FakeRank(2, 4, 9)};
  ranks[0].snap.streams[0].pending.clear();
  queue(ranks[0], "ncclSend", verdict_test::kComm, std::nullopt, 1, true);
  queue(ranks[0], "ncclAllReduce", verdict_test::kComm, 9, std::nullopt, false);
  for (const FakeRank& r : ranks) r.write(dir.path);
  RankState gone;
  gone.rank = 1;
  gone.phase = DumpPhase::kDone;
  gone.pid = 101;
  gone.host = "node0";
  gone.exited_seen_by = 0;
  gone.exited_on_term = on_term;
  gone.note = "process 101 had ended";
  (void)writeFileAtomically(rankStatePath(dir.path, 1), toJson(gone).dump());
  writeTrigger(dir.path, 2, "ncclAllReduce", verdict_test::kComm, 9, std::nullopt);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job)).verdict;
}

}  // namespace

TEST_CASE("ARankKilledWhileATransferWaitsOnItIsNamedFromItsNodesWord") {
  const Verdict v = tornDownJob(false);
  INFO(v.headline);
  CHECK(v.confident);
  CHECK(v.culprit_ranks == std::vector<int>{1});
  CHECK(saysSomewhere(v, "rank(s) 1 exited"));
}

TEST_CASE("ARankThatEndedOnTheLaunchersSigtermIsNoCulpritAndTheSilentRankIsTheSuspect") {
  // torchrun or srun --kill-on-bad-exit ends every rank once one failed: a rank that passed the
  // SIGTERM on with nothing pending went because of the failure, not as it. Rank 3, of which
  // nothing is known, is the one suspect; nobody is named.
  const Verdict v = tornDownJob(true);
  INFO(v.headline);
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].ranks == std::vector<int>{3});
  CHECK(saysSomewhere(v, "rank 1 ended on the launcher's SIGTERM with nothing pending"));
  CHECK(saysSomewhere(v, "rank 3 left no file at all and nobody said why: it is likely the rank that failed"));
}
