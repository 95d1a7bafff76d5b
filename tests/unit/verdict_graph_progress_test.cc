// The debugger's records of every connection of a tree or PAT channel (RingProgress::
// connections), and where their waits end. The tree here: rank 0 the root with children 1
// and 2, rank 3 the child of 2; data goes up (child -> parent) in the reduce phase.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "hangwatch/verdict/graph_progress_analysis.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;

namespace {

constexpr uint64_t kBase = 100;  // every connection's count when the collective began

// One end as a rank reads it: its own count (steps consumed, or posted) and the peer's
// counter (the sender's tail, or the receiver's head), in steps of this collective.
RingConnection end(const char* direction, const char* role, int peer, uint64_t mine, uint64_t peers, bool waiting) {
  RingConnection c;
  c.direction = direction;
  c.role = role;
  c.peer = peer;
  c.waiting = waiting;
  c.base_step = kBase;
  c.observed_step = kBase + peers;
  if (std::string(direction) == "recv") {
    c.target_step = kBase + mine + 1;
  } else {
    c.posted_step = kBase + mine;
    c.target_step = kBase + mine + 1 > 8 ? kBase + mine + 1 - 8 : 0;
  }
  return c;
}

RingProgress record(int rank, int channel, std::vector<RingConnection> connections, const char* algo = "TREE",
                    uint64_t seq = 10) {
  RingProgress r;
  r.comm = verdict_test::kComm;
  r.op = "ncclAllReduce";
  r.seq = seq;
  r.channel = channel;
  r.rank = rank;
  r.algorithm = algo;
  r.connections = std::move(connections);
  return r;
}

GraphFinding analyze(const std::vector<RingProgress>& records, std::set<int> finished = {}) {
  GraphProgressAnalysis a([](int r) { return r; }, [finished](int r) { return finished.count(r) > 0; });
  for (const RingProgress& r : records) a.add(r);
  return a.analyze(verdict_test::kComm, 10);
}

// Link 3 -> 2 lost what 3 sent: 3 posted its 8 slots and waits for a free one, 2 saw nothing and
// waits for it; 0 waits for 2's sums, 1 filled its slots into 0 and waits for 0 to free one.
std::vector<RingProgress> treeWithDeadLink(int channel) {
  return {record(0, channel, {end("recv", "tree-child", 1, 1, 8, false), end("recv", "tree-child", 2, 0, 0, true)}),
          record(1, channel, {end("send", "tree-parent", 0, 8, 1, true)}),
          record(2, channel, {end("recv", "tree-child", 3, 0, 0, true), end("send", "tree-parent", 0, 0, 0, false)}),
          record(3, channel, {end("send", "tree-parent", 2, 8, 0, true)})};
}

}  // namespace

TEST_CASE("TreeDeadLinkIsWhereDataWasPostedAndNeverSeen") {
  std::vector<RingProgress> records = treeWithDeadLink(0);
  for (const RingProgress& r : treeWithDeadLink(1)) records.push_back(r);
  GraphFinding f = analyze(records);
  REQUIRE(f.link);
  CHECK(f.link->from == 3);
  CHECK(f.link->to == 2);
  CHECK_FALSE(f.rank);
  CHECK(f.algorithm == "TREE");
  CHECK(f.channels_agree == 2);
  CHECK(f.channels_total == 2);
  REQUIRE(f.stop);
  CHECK(f.stop->kind == GraphStop::Kind::kDataLost);
  CHECK(f.stop->posted == 8);
  CHECK(f.stop->delivered == 0);
  // Every wait of the channel ends there: 0's, 1's (through 0), 2's and 3's.
  CHECK(f.channels.front().stops.front().waits == 4);
}

TEST_CASE("TreeRankWhoseThreadsWaitOnNothingIsWhereEveryWaitEnds") {
  // Rank 2's GPU stopped: its record shows none of its threads waiting on a connection; 3
  // filled the slots 2 gave it, 0 waits for 2's sums.
  GraphFinding f = analyze({record(0, 0, {end("recv", "tree-child", 1, 1, 8, false), end("recv", "tree-child", 2, 0, 0, true)}),
                            record(1, 0, {end("send", "tree-parent", 0, 8, 1, true)}),
                            record(2, 0, {}),
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true)})});
  REQUIRE(f.rank);
  CHECK(*f.rank == 2);
  CHECK_FALSE(f.link);
  CHECK(f.stop->kind == GraphStop::Kind::kRankStopped);
}

TEST_CASE("ARankTheDebuggerReadNothingOfIsASuspectNeverACulprit") {
  GraphFinding f = analyze({record(0, 0, {end("recv", "tree-child", 1, 1, 8, false), end("recv", "tree-child", 2, 0, 0, true)}),
                            record(1, 0, {end("send", "tree-parent", 0, 8, 1, true)}),
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true)})});
  CHECK_FALSE(f.rank);
  CHECK_FALSE(f.link);
  CHECK(f.unread == std::vector<int>{2});
  REQUIRE(f.several.size() == 1);
  CHECK(f.several.front().kind == GraphStop::Kind::kRankUnread);
  CHECK_FALSE(f.note.empty());
}

TEST_CASE("WaitsOnEachOtherThatCarryNoDataEndAtTheStopNotAtTheCycle") {
  // As NCCL's runTreeSplit: 2's broadcast half waits for 0's data while 0 waits for 2's sums;
  // neither of those connections holds data; 2's reduce half waits on the dead link 3 -> 2.
  GraphFinding f = analyze({record(0, 0, {end("recv", "tree-child", 2, 0, 0, true), end("send", "tree-child", 2, 0, 0, false)}),
                            record(2, 0, {end("recv", "tree-parent", 0, 0, 0, true), end("send", "tree-parent", 0, 0, 0, false),
                                          end("recv", "tree-child", 3, 0, 0, true)}),
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true), end("recv", "tree-parent", 2, 0, 0, true)})});
  REQUIRE(f.link);
  CHECK(f.link->from == 3);
  CHECK(f.link->to == 2);
}

TEST_CASE("ALostClearToSendOnATreeEdgeIsTheLink") {
  // 2 took all 8 steps 3 posted and waits for the ninth; 3 still believes no slot is free.
  GraphFinding f = analyze({record(2, 0, {end("recv", "tree-child", 3, 8, 8, true)}),
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true)})});
  REQUIRE(f.link);
  CHECK(f.link->from == 3);
  CHECK(f.link->to == 2);
  CHECK(f.stop->kind == GraphStop::Kind::kCreditLost);
}

TEST_CASE("PatReceiverWaitingOnASenderThatFinishedNamesTheLink") {
  // PAT AllGather, link 2 -> 3 dead: every rank but 3 completed the collective.
  GraphFinding f = analyze({record(3, 0, {end("recv", "pat", 2, 3, 3, true), end("send", "pat", 2, 4, 4, false)}, "PAT")},
                           {0, 1, 2});
  REQUIRE(f.link);
  CHECK(f.link->from == 2);
  CHECK(f.link->to == 3);
  CHECK(f.stop->kind == GraphStop::Kind::kSenderFinished);
}

TEST_CASE("WaitsEndingInTwoPlacesNameNeither") {
  // Two dead links, 3 -> 2 and 1 -> 0: the channel's waits end at both.
  GraphFinding f = analyze({record(0, 0, {end("recv", "tree-child", 1, 0, 0, true)}),
                            record(1, 0, {end("send", "tree-parent", 0, 8, 0, true)}),
                            record(2, 0, {end("recv", "tree-child", 3, 0, 0, true)}),
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true)})});
  CHECK_FALSE(f.link);
  CHECK_FALSE(f.rank);
  CHECK(f.several.size() == 2);
}

TEST_CASE("RingRecordsAreNotTheGraphsToRead") {
  RingProgress ring = record(0, 0, {end("recv", "ring-prev", 3, 0, 0, true)}, "RING");
  CHECK_FALSE(GraphProgressAnalysis::readsGraph(ring));
  CHECK(GraphProgressAnalysis::readsGraph(record(0, 0, {end("recv", "tree-child", 1, 0, 0, true)})));
  CHECK_FALSE(GraphProgressAnalysis::readsGraph(record(0, 0, {})));
}

TEST_CASE("ATreeJobsReportNamesTheDeadLinkConfidentlyFromTheDebuggersGraph") {
  verdict_test::TempDir dir;
  std::vector<RingProgress> records = treeWithDeadLink(0);
  for (int r = 0; r < 4; ++r) {
    verdict_test::FakeRank rank(r, 4, 10);
    for (const RingProgress& p : records)
      if (p.rank == r) rank.dump.ring_progress.push_back(p);
    rank.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, 10);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  Report report = ReportBuilder::build(std::move(*job));
  const Verdict& v = report.verdict;
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.confident);
  REQUIRE(v.culprit_link);
  CHECK(v.culprit_link->from == 3);
  CHECK(v.culprit_link->to == 2);
  bool said = false;
  for (const std::string& e : v.evidence)
    said = said || e.find("TREE channel(s) every wait") != std::string::npos;
  CHECK(said);
}

TEST_CASE("TheCudaReadersTreeRecordsWithoutASeqStandForTheCollective") {
  // cuda-gdb reads NCCL's memory, which does not hold the watchdog's seq: the records of the hung
  // tree kernel say none, and are the collective's when no record says its seq.
  std::vector<RingProgress> records = treeWithDeadLink(0);
  for (RingProgress& r : records) {
    r.seq_known = false;
    r.seq = 0;
    r.source = "cuda-registers";
  }
  GraphFinding f = analyze(records);
  REQUIRE(f.link);
  CHECK(*f.link == Link{3, 2});
  // A record of another collective (its seq known, not this one's) is not taken for it.
  std::vector<RingProgress> other = treeWithDeadLink(0);
  for (RingProgress& r : other) r.seq = 9;
  CHECK(analyze(other).channels_total == 0);
}

TEST_CASE("ARecordFromNcclsHostMemoryAloneSaysNothingOfTheRanksWaits") {
  // cuda-gdb found no thread of rank 2's tree block in a wait (its roles' threads were not
  // where they were looked for, or past their waits): its record is NCCL's host copy only. The
  // others wait on it: rank 2 is not read, a suspect, never a GPU that stopped.
  RingProgress host_only =
      record(2, 0, {end("recv", "tree-child", 3, 0, 0, false), end("send", "tree-parent", 0, 0, 0, false)});
  host_only.source = "nccl-host";
  GraphFinding f = analyze({record(0, 0, {end("recv", "tree-child", 1, 1, 8, false), end("recv", "tree-child", 2, 0, 0, true)}),
                            record(1, 0, {end("send", "tree-parent", 0, 8, 1, true)}), host_only,
                            record(3, 0, {end("send", "tree-parent", 2, 8, 0, true)})});
  CHECK_FALSE(f.rank);
  CHECK(f.unread == std::vector<int>{2});
}
