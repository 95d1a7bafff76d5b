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
