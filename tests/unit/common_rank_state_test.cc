// ranks/rNNNNN.state.json: the collecting/done record abort mode and the report rely on.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/rank_state.h"

using namespace hangwatch;

TEST_CASE("RankStateRoundTripsEveryField") {
  RankState s;
  s.rank = 7;
  s.phase = DumpPhase::kDone;
  s.pid = 4321;
  s.host = "node3";
  s.time_unix_s = 1790000000.5;
  s.deadline_unix_s = 1790000080.5;
  s.collector_pid = 4400;
  s.snapshot = "written";
  s.forensics = "degraded";
  s.note = "target exited during the debugger phase";
  auto back = rankStateFromText(toJson(s).dump());
  REQUIRE(back.ok());
  CHECK(back->rank == 7);
  CHECK(back->done());
  CHECK(back->pid == 4321);
  CHECK(back->host == "node3");
  CHECK(back->time_unix_s == 1790000000.5);
  CHECK(back->deadline_unix_s == 1790000080.5);
  CHECK(back->collector_pid == 4400);
  CHECK(back->snapshot == "written");
  CHECK(back->forensics == "degraded");
  CHECK(back->note == s.note);
  CHECK(toJson(s)["state"] == "done");
  CHECK_FALSE(back->exited_seen_by);
  // A rank whose process another rank of its node found gone.
  s.exited_seen_by = 3;
  back = rankStateFromText(toJson(s).dump());
  REQUIRE(back.ok());
  CHECK(back->exited_seen_by == std::optional<int>(3));
  CHECK_FALSE(back->exited_on_term);
  CHECK_FALSE(rankStateFromText(R"({"state": "done", "exited_seen_by": 1})")->exited_on_term);  // an older file
  CHECK_FALSE(rankStateFromText(R"({"state": "done", "exited_seen_by": "three"})").ok());
  // One that ended on the launcher's SIGTERM with nothing pending.
  s.exited_on_term = true;
  back = rankStateFromText(toJson(s).dump());
  REQUIRE(back.ok());
  CHECK(back->exited_on_term);
  CHECK(toJson(*back) == toJson(s));
  CHECK_FALSE(rankStateFromText(R"({"state": "done", "exited_seen_by": 1, "exited_on_term": "yes"})").ok());
  s.exited_on_term = false;
  // One found frozen, with the device its node's board knows.
  s.exited_seen_by.reset();
  s.stopped_seen_by = 2;
  s.device = 5;
  back = rankStateFromText(toJson(s).dump());
  REQUIRE(back.ok());
  CHECK(back->stopped_seen_by == std::optional<int>(2));
  CHECK(back->device == std::optional<int>(5));
  CHECK_FALSE(back->exited_seen_by);
  CHECK(toJson(*back) == toJson(s));
  CHECK_FALSE(rankStateFromText(R"({"state": "done", "stopped_seen_by": [1]})").ok());
}

TEST_CASE("CollectingRankIsSettledOnlyPastItsDeadline") {
  RankState s;
  s.phase = DumpPhase::kCollecting;
  s.deadline_unix_s = 100;
  CHECK_FALSE(s.settled(99));
  CHECK(s.settled(101));
  s.phase = DumpPhase::kDone;
  CHECK(s.settled(0));
}

TEST_CASE("RankStateReaderRejectsUnknownStatesTruncationAndWrongTypes") {
  CHECK_FALSE(rankStateFromText(R"({"rank": 1, "state": "finished"})").ok());
  CHECK_FALSE(rankStateFromText(R"({"rank": 1, "state": "do)").ok());
  CHECK_FALSE(rankStateFromText(R"({"rank": "one", "state": "done"})").ok());
  auto minimal = rankStateFromText(R"({"state": "collecting"})");
  REQUIRE(minimal.ok());
  CHECK(minimal->rank == -1);
  CHECK(minimal->deadline_unix_s == 0);
}

TEST_CASE("RankStateFileIsReadBackAndAMissingOneIsAnError") {
  char tmpl[] = "/tmp/rank-state-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  std::string path = std::string(tmpl) + "/ranks/r00002.state.json";
  CHECK_FALSE(readRankState(path).ok());
  RankState s;
  s.rank = 2;
  REQUIRE(writeFileAtomically(path, toJson(s).dump()).ok());
  auto back = readRankState(path);
  REQUIRE(back.ok());
  CHECK(back->rank == 2);
  CHECK_FALSE(back->done());
  std::filesystem::remove_all(tmpl);
}
