#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <random>
#include <set>
#include <vector>

#include "hangwatch/stackmerge/rank_set.h"

using hangwatch::stackmerge::RankSet;

namespace {

RankSet fromList(const std::vector<int>& ranks) {
  RankSet s;
  for (int r : ranks) s.insert(r);
  return s;
}

}  // namespace

TEST_CASE("RankSetAscendingInsertsCoalesceIntoIntervals") {
  RankSet s = fromList({0, 1, 2, 3, 7, 9, 10, 11, 12});
  CHECK(s.toString() == "0-3,7,9-12");
  CHECK(s.intervals().size() == 3);
  CHECK(s.size() == 9);
}

TEST_CASE("RankSetEmptyPrintsAsEmptyString") {
  RankSet s;
  CHECK(s.empty());
  CHECK(s.size() == 0);
  CHECK(s.toString().empty());
  auto parsed = RankSet::parse("");
  REQUIRE(parsed.ok());
  CHECK(parsed->empty());
}

TEST_CASE("RankSetOutOfOrderInsertsMatchASortedSet") {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> pick(0, 199);
  RankSet s;
  std::set<int> reference;
  for (int i = 0; i < 2000; ++i) {
    const int r = pick(rng);
    s.insert(r);
    reference.insert(r);
    REQUIRE(s.size() == reference.size());
  }
  CHECK(s.toVector() == std::vector<int>(reference.begin(), reference.end()));
  for (int r = -1; r <= 200; ++r) CHECK(s.contains(r) == (reference.count(r) == 1));
  for (size_t i = 1; i < s.intervals().size(); ++i)
    CHECK(s.intervals()[i].first > s.intervals()[i - 1].second + 1);
}

TEST_CASE("RankSetInsertBridgingTwoIntervalsMergesThem") {
  RankSet s = fromList({1, 2, 4, 5});
  s.insert(3);
  CHECK(s.toString() == "1-5");
  CHECK(s.intervals().size() == 1);
  s.insert(0);
  s.insert(3);
  CHECK(s.toString() == "0-5");
  CHECK(s.size() == 6);
}

TEST_CASE("RankSetInsertAllIsTheUnion") {
  RankSet a = fromList({0, 1, 2, 10, 11});
  RankSet b = fromList({3, 5, 9, 20});
  a.insertAll(b);
  CHECK(a.toString() == "0-3,5,9-11,20");
  CHECK(a.size() == 9);
  RankSet empty;
  empty.insertAll(a);
  CHECK(empty == a);
}

TEST_CASE("RankSetToStringParsesBackToTheSameSet") {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    RankSet s;
    for (int r = 0; r < 300; ++r)
      if (rng() % 3 != 0) s.insert(r);
    auto parsed = RankSet::parse(s.toString());
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
  }
}

TEST_CASE("RankSetParseRejectsMalformedText") {
  for (const char* bad : {"a", "1,", ",1", "1-", "3-1", "1,1", "2-4,3", "1-2,3", "1;2", "1 ,2"}) {
    INFO(bad);
    CHECK_FALSE(RankSet::parse(bad).ok());
  }
}

TEST_CASE("RankSetHandlesExtremeRanksWithoutOverflow") {
  RankSet s = fromList({INT_MAX - 1, INT_MAX});
  s.insert(INT_MIN);
  CHECK(s.size() == 3);
  CHECK(s.contains(INT_MAX));
  CHECK(s.contains(INT_MIN));
  auto parsed = RankSet::parse(s.toString());
  REQUIRE(parsed.ok());
  CHECK(*parsed == s);
}

TEST_CASE("RankSetOfSixteenThousandContiguousRanksIsOneInterval") {
  RankSet s;
  for (int r = 0; r < 16384; ++r) s.insert(r);
  CHECK(s.intervals().size() == 1);
  CHECK(s.toString() == "0-16383");
}
