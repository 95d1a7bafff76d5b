#include <catch2/catch.hpp>

#include "hangwatch/watchdog_snapshot.h"

using namespace hangwatch;

TEST_CASE("WatchdogSnapshotRoundTrips") {
  WatchdogSnapshot s;
  s.time_unix_s = 1700000000.5;
  s.timeout_s = 3;
  s.detected_here = true;
  s.identity.rank = 2;
  s.identity.local_rank = 2;
  s.identity.world_size = 4;
  s.identity.rank_source = "OMPI_COMM_WORLD_RANK";
  s.identity.host = "node7";
  s.identity.pid = 4242;
  s.identity.job_id = "job-1";
  s.identity.device = 1;
  s.identity.cuda_visible_devices = "0,1";
  TriggerRecord t;
  t.rank = 1;
  t.reason = "timeout";
  t.stuck_op = StuckOp{"ncclAllReduce", "00000000deadbeef", 10, 4096, std::nullopt, "0x10", 3.5};
  s.trigger = t;
  s.comms.push_back({"00000000deadbeef", 2, 4, 1, "live", 10, 9});
  s.comms.push_back({"0000000000000001", 0, 2, 1, "destroyed", std::nullopt, std::nullopt});
  SnapshotStream st;
  st.stream = "0x10";
  st.device = 3;
  st.pending.push_back({"ncclAllReduce", "collective", "00000000deadbeef", 10, 4096, "float32", 1024, std::nullopt,
                        3.5, 3.6, true});
  st.pending.push_back({"ncclSend", "p2p", "00000000deadbeef", std::nullopt, 64, "uint8", 64, 3, 0, 3.4, false});
  s.streams.push_back(st);
  s.host_calls.push_back({"ncclGroupEnd", 4243, "python", 4.0, "00000000deadbeef", std::nullopt});
  s.health = {1, 100, 98, 2, 0};

  auto back = watchdogSnapshotFromJson(toJson(s));
  REQUIRE(back.ok());
  CHECK(toJson(*back) == toJson(s));
  CHECK(back->streams[0].pending[1].peer == std::optional<int>(3));
  CHECK(back->streams[0].device == std::optional<int>(3));
  CHECK(back->trigger->stuck_op->seq == std::optional<uint64_t>(10));
}

TEST_CASE("WatchdogSnapshotReaderToleratesMissingFieldsAndRejectsWrongTypes") {
  auto sparse = watchdogSnapshotFromJson(nlohmann::json{{"identity", {{"rank", 5}}}});
  REQUIRE(sparse.ok());
  CHECK(sparse->identity.rank == std::optional<int>(5));
  CHECK(sparse->streams.empty());
  CHECK_FALSE(sparse->trigger);
  auto wrong = watchdogSnapshotFromJson(nlohmann::json{{"streams", "not a list"}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("streams") != std::string::npos);
}
