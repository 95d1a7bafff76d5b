#include <catch2/catch.hpp>

#include "hangwatch/common/watchdog_snapshot.h"
#include "sample_records.h"

using namespace hangwatch;

TEST_CASE("WatchdogSnapshotRoundTrips") {
  WatchdogSnapshot s = test::richSnapshot();

  auto back = watchdogSnapshotFromJson(toJson(s));
  REQUIRE(back.ok());
  CHECK(toJson(*back) == toJson(s));
  CHECK(back->comms[0].nccl_id == "1852e9190e780d2a");
  CHECK(back->comms[0].address == "0x55d0c0a01000");
  REQUIRE(back->comms[0].recent.size() == 2);
  CHECK(back->comms[0].recent[1].root == std::optional<int>(0));
  CHECK(back->comms[0].recent[1].dtype == "int64");
  CHECK_FALSE(back->comms[0].recent[0].root);
  CHECK(back->comms[1].recent.empty());
  CHECK(toJson(s)["comms"][1]["nccl_id"].is_null());  // unknown is null, not ""
  REQUIRE(back->progress);
  CHECK(back->progress->connections[0].steps == std::array<uint64_t, 4>{32, 30, 30, 29});
  CHECK(back->progress->connections[1].moved_s_ago[1] == std::nullopt);
  CHECK(back->progress->connections[1].untracked_ops == 2u);
  CHECK(back->progress->kernel_channels[0].stopped == 3u);
  CHECK(back->progress->dropped_connections == 1u);
  REQUIRE(back->progress->algorithms.size() == 2);
  CHECK(back->progress->algorithms[1].algo == "TREE");
  CHECK(back->progress->algorithms[0].launched == 812u);
  CHECK(back->progress->algorithms[0].last_s_ago == std::optional<double>(2.5));
  CHECK_FALSE(back->progress->algorithms[1].last_s_ago);
  CHECK(back->progress->dropped_comms == 2u);
  // Sends and receives per peer, and those past the kept peers.
  REQUIRE(back->comms[0].p2p.size() == 2);
  CHECK(back->comms[0].p2p[0].peer == 6);
  CHECK(back->comms[0].p2p[0].sends == 40u);
  CHECK(back->comms[0].p2p[0].receives == 39u);
  CHECK(back->comms[0].p2p[1].receives == 40u);
  CHECK(back->comms[0].p2p_untracked == 3u);
  CHECK(back->comms[1].p2p.empty());
  // NCCL's asynchronous error: named when there is one, left out when there is none.
  CHECK(back->comms[0].async_error == "ncclRemoteError");
  CHECK(back->comms[1].async_error.empty());
  CHECK_FALSE(toJson(s)["comms"][1].contains("async_error"));
  // A dump written before transfers were counted reads as none issued.
  nlohmann::json before_p2p = toJson(s);
  before_p2p["comms"][0].erase("p2p");
  before_p2p["comms"][0].erase("p2p_untracked");
  auto no_p2p = watchdogSnapshotFromJson(before_p2p);
  REQUIRE(no_p2p.ok());
  CHECK(no_p2p->comms[0].p2p.empty());
  CHECK(no_p2p->comms[0].p2p_untracked == 0u);
  // A dump written before the issued collectives were kept reads as none kept.
  nlohmann::json before_recent = toJson(s);
  before_recent["comms"][0].erase("recent");
  auto no_recent = watchdogSnapshotFromJson(before_recent);
  REQUIRE(no_recent.ok());
  CHECK(no_recent->comms[0].recent.empty());
  // A dump written before the algorithms were recorded reads as none seen.
  nlohmann::json old = toJson(s);
  old["progress"].erase("algorithms");
  old["progress"].erase("dropped_comms");
  auto older = watchdogSnapshotFromJson(old);
  REQUIRE(older.ok());
  CHECK(older->progress->algorithms.empty());
  CHECK(back->streams[0].pending[1].peer == std::optional<int>(3));
  CHECK(back->streams[0].device == std::optional<int>(3));
  CHECK(back->trigger->stuck_op->seq == std::optional<uint64_t>(10));
  // An init call names the communicator it forms; other host calls carry no `joining`.
  CHECK(toJson(s)["host_calls"][0]["joining"].is_null());
  REQUIRE(back->host_calls[1].joining);
  CHECK(back->host_calls[1].joining->comm == "00000000cafef00d");
  CHECK(back->host_calls[1].joining->rank == 3);
  CHECK(back->host_calls[1].joining->size == 8);
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"host_calls", {{{"joining", {{"size", "8"}}}}}}}).ok());
  // The ids this process made; none made is no field, and a dump from before reads as none.
  CHECK(back->unique_ids_made == std::vector<std::string>{"00000000cafef00d", "00000000feedface"});
  WatchdogSnapshot none = s;
  none.unique_ids_made.clear();
  CHECK_FALSE(toJson(none).contains("unique_ids_made"));
  CHECK(watchdogSnapshotFromJson(toJson(none))->unique_ids_made.empty());
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"unique_ids_made", "00000000cafef00d"}}).ok());
}

TEST_CASE("ASuspectSnapshotRoundTripsWithItsWarningAndWhenItResumed") {
  WatchdogSnapshot s = test::richSnapshot();
  CHECK_FALSE(toJson(s).contains("suspect"));  // only suspect snapshots carry it
  s.suspect = SuspectState{2, 7.5};
  auto back = watchdogSnapshotFromJson(toJson(s));
  REQUIRE(back.ok());
  REQUIRE(back->suspect);
  CHECK(back->suspect->episode == 2);
  CHECK(back->suspect->resumed_after_s == std::optional<double>(7.5));
  CHECK(toJson(*back) == toJson(s));
  s.suspect->resumed_after_s.reset();
  CHECK(toJson(s)["suspect"]["resumed_after_s"].is_null());
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"suspect", {{"episode", "one"}}}}).ok());
}

TEST_CASE("NcclsInfoLinesRoundTripAndADumpWithoutThemReadsAsNone") {
  WatchdogSnapshot s = test::richSnapshot();
  auto back = watchdogSnapshotFromJson(toJson(s));
  REQUIRE(back.ok());
  REQUIRE(back->nccl_log);
  CHECK(back->nccl_log->file == s.nccl_log->file);
  CHECK(back->nccl_log->lines == s.nccl_log->lines);
  CHECK(back->nccl_log->lines_dropped == 1);
  CHECK(back->nccl_log->truncated);
  CHECK_FALSE(toJson(s)["nccl_log"].contains("unread"));  // read: no reason why not
  // None read: the file is null and the reason says why.
  s.nccl_log = SnapshotNcclLog{};
  s.nccl_log->unread = "NCCL_DEBUG=WARN prints no INFO line";
  CHECK(toJson(s)["nccl_log"]["file"].is_null());
  CHECK(watchdogSnapshotFromJson(toJson(s))->nccl_log->unread == "NCCL_DEBUG=WARN prints no INFO line");
  // A dump from before: no field, none.
  s.nccl_log.reset();
  CHECK_FALSE(toJson(s).contains("nccl_log"));
  CHECK_FALSE(watchdogSnapshotFromJson(toJson(s))->nccl_log);
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"nccl_log", {{"lines", "one line"}}}}).ok());
}

TEST_CASE("WatchdogSnapshotReaderToleratesMissingFieldsAndRejectsWrongTypes") {
  auto sparse = watchdogSnapshotFromJson(nlohmann::json{{"identity", {{"rank", 5}}}});
  REQUIRE(sparse.ok());
  CHECK(sparse->identity.rank == std::optional<int>(5));
  CHECK(sparse->streams.empty());
  CHECK_FALSE(sparse->trigger);
  CHECK_FALSE(sparse->progress);
  auto wrong = watchdogSnapshotFromJson(nlohmann::json{{"streams", "not a list"}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("streams") != std::string::npos);
}

TEST_CASE("ProxyStagesAreNamedPerDirectionInTheSnapshot") {
  const nlohmann::json j = toJson(test::richSnapshot())["progress"]["connections"];
  CHECK(j[0]["steps"] == nlohmann::json{{"posted", 32}, {"arrived", 30}, {"delivered", 30}, {"done", 29}});
  CHECK(j[1]["steps"] == nlohmann::json{{"posted", 32}, {"filled", 30}, {"sent", 30}, {"done", 29}});
  CHECK(j[0]["moved_s_ago"]["arrived"].is_null());
  CHECK(j[1]["moved_s_ago"]["filled"].is_null());
  CHECK(proxyStageIndex("delivered") == 2);
  CHECK(proxyStageIndex("nonsense") == -1);
  // A progress section of the wrong shape is an error, not silently empty.
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"progress", 3}}).ok());
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"progress", {{"connections", {{{"steps", 5}}}}}}}).ok());
}
