#include <catch2/catch.hpp>

#include "hangwatch/verdict/ring_progress_analysis.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;

namespace {

RingFinding analyzeRanks(const std::vector<verdict_test::FakeRank>& ranks, uint64_t seq) {
  RingProgressAnalysis a([](int r) { return r; });
  for (const auto& r : ranks) {
    for (const RingProgress& p : r.dump.ring_progress) a.add(p);
  }
  return a.analyze(verdict_test::kComm, seq);
}

}  // namespace

TEST_CASE("DeadLinkIsTheOneConnectionWithLeastProgressOnEveryChannel") {
  // Link 1->2 delivers nothing: 2 never sees 1's tail move and 1 never sees 2's head move;
  // every other connection got a few steps of its in-flight window through.
  auto delivered = [](int from, int ch) -> std::optional<uint64_t> { return from == 1 ? 40 : 43 + ch + from % 2; };
  auto consumed = [](int from, int ch) -> std::optional<uint64_t> { return from == 1 ? 40 : 42 + ch; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(4, 10, 2, delivered, consumed), 10);
  REQUIRE(f.link);
  CHECK(f.link->from == 1);
  CHECK(f.link->to == 2);
  CHECK_FALSE(f.rank);
  CHECK(f.channels_agree == 2);
  CHECK(f.channels_total == 2);
}

TEST_CASE("DeadRankIsNamedWhenBothItsConnectionsAreLeast") {
  // Rank 2 stopped: it consumes nothing from 1 and sends nothing to 3, and writes no record.
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 2 ? 40 : 46; };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return from == 1 ? 40 : 45; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(4, 10, 2, delivered, consumed, {2}), 10);
  REQUIRE(f.rank);
  CHECK(*f.rank == 2);
  CHECK_FALSE(f.link);
  CHECK(f.channels_agree == 2);
}

TEST_CASE("DeadLinkOnOneChannelIsCountedOnThatChannelOnly") {
  auto delivered = [](int from, int ch) -> std::optional<uint64_t> { return from == 3 && ch == 1 ? 10 : 20; };
  auto consumed = [](int from, int ch) -> std::optional<uint64_t> { return from == 3 && ch == 1 ? 10 : 19; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(8, 4, 2, delivered, consumed), 4);
  REQUIRE(f.link);
  CHECK(f.link->from == 3);
  CHECK(f.link->to == 4);
  CHECK(f.channels_agree == 1);
  CHECK(f.channels_total == 2);
}

TEST_CASE("EquallyStuckConnectionsNameNothing") {
  auto same = [](int, int) -> std::optional<uint64_t> { return 7; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(4, 1, 2, same, same), 1);
  CHECK_FALSE(f.link);
  CHECK_FALSE(f.rank);
  CHECK_FALSE(f.note.empty());
}

TEST_CASE("RecordsOfAnotherSequenceNumberAreIgnored") {
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 0 ? 1 : 5; };
  auto consumed = [](int, int) -> std::optional<uint64_t> { return 5; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(4, 3, 1, delivered, consumed), 4);
  CHECK(f.channels_total == 0);
}

TEST_CASE("OneSidedViewsStillLocateTheLink") {
  // Only receivers' records (senders missing their send side): delivered alone decides.
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return from == 2 ? 3 : 9; };
  auto none = [](int, int) -> std::optional<uint64_t> { return std::nullopt; };
  RingFinding f = analyzeRanks(verdict_test::ringJob(6, 2, 2, delivered, none), 2);
  REQUIRE(f.link);
  CHECK(f.link->from == 2);
  CHECK(f.link->to == 3);
}

TEST_CASE("ProgressCountsFromWhereTheCollectiveBegan") {
  // Absolute counters differ per connection; only 2->3 moved no step since the collective began.
  auto delivered = [](int from, int) -> std::optional<uint64_t> { return 1000 * (from + 1) + (from == 2 ? 0 : 3); };
  auto consumed = [](int from, int) -> std::optional<uint64_t> { return 1000 * (from + 1) + (from == 2 ? 0 : 2); };
  auto ranks = verdict_test::ringJob(4, 6, 2, delivered, consumed);
  for (auto& r : ranks) {
    for (RingProgress& p : r.dump.ring_progress) {
      p.recv->base_step = 1000 * (p.prev + 1);
      p.send->base_step = 1000 * (p.rank + 1);
    }
  }
  RingFinding f = analyzeRanks(ranks, 6);
  REQUIRE(f.link);
  CHECK(f.link->from == 2);
  CHECK(f.link->to == 3);
}

TEST_CASE("ARecordMarkedStalledNamesNobodyWhenCountersDoNotTellTheRingApart") {
  // `stalled` was simgpu's own fact; no debugger reads it from a GPU, so it decides nothing.
  auto same = [](int, int) -> std::optional<uint64_t> { return 4; };
  auto ranks = verdict_test::ringJob(4, 6, 1, same, same);
  ranks[1].dump.ring_progress[0].stalled = true;
  ranks[1].dump.ring_progress[0].recv.reset();
  ranks[1].dump.ring_progress[0].send.reset();
  RingFinding f = analyzeRanks(ranks, 6);
  CHECK_FALSE(f.rank);
  CHECK_FALSE(f.link);
}

namespace {

RingConnection view(int peer, uint64_t target, uint64_t observed, bool waiting, std::optional<uint64_t> posted = {}) {
  RingConnection c;
  c.peer = peer;
  c.target_step = target;
  c.observed_step = observed;
  c.waiting = waiting;
  c.base_step = 8;
  c.posted_step = posted;
  return c;
}

RingProgress record(int rank, RingConnection recv, RingConnection send) {
  RingProgress p;
  p.comm = verdict_test::kComm;
  p.seq = 12;
  p.rank = rank;
  p.prev = (rank + 3) % 4;
  p.next = (rank + 1) % 4;
  p.recv = recv;
  p.send = send;
  return p;
}

}  // namespace

TEST_CASE("ALostClearToSendNamesItsLinkNotTheSenderThatLooksStopped") {
  // As simnccl's lost-credit=1->2 left a 4-rank ring (counters from a kept campaign dump):
  // rank 2 took all 13 steps rank 1 posted and waits for the 14th; rank 1 waits for a
  // clear-to-send it heard last at 5. Blocked, rank 1 also stops taking from rank 0, so both
  // its connections hold the least progress: before, the verdict named rank 1, confidently.
  RingProgressAnalysis a([](int r) { return r; });
  a.add(record(0, view(3, 22, 21, false), view(1, 14, 13, true, 21)));
  a.add(record(1, view(0, 14, 21, false), view(2, 6, 5, true, 13)));
  a.add(record(2, view(1, 14, 13, true), view(3, 7, 14, false, 14)));
  a.add(record(3, view(2, 15, 14, true), view(0, 14, 21, false, 21)));
  RingFinding f = a.analyze(verdict_test::kComm, 12);
  INFO(f.note);
  CHECK_FALSE(f.rank);
  REQUIRE(f.link);
  CHECK(*f.link == Link{1, 2});
  CHECK(f.credit_lost);
}

TEST_CASE("ADeadLinkIsNoLostCreditTheReceiverLacksWhatWasPosted") {
  // Link 1->2 delivers nothing: rank 2 waits for data rank 1 posted (13 posted, 5 seen).
  RingProgressAnalysis a([](int r) { return r; });
  a.add(record(0, view(3, 22, 21, false), view(1, 14, 13, true, 21)));
  a.add(record(1, view(0, 14, 21, false), view(2, 6, 5, true, 13)));
  a.add(record(2, view(1, 6, 5, true), view(3, 7, 14, false, 14)));
  a.add(record(3, view(2, 15, 14, true), view(0, 14, 21, false, 21)));
  RingFinding f = a.analyze(verdict_test::kComm, 12);
  CHECK_FALSE(f.credit_lost);
}
