#include <catch2/catch.hpp>

#include "hangwatch/common/watchdog_snapshot.h"
#include "sample_records.h"

using namespace hangwatch;

namespace {

// The profiler progress section with both directions, unknown times and drops.
SnapshotProgress sampleProgress() {
  SnapshotProgress p;
  p.plugin_inits = 2;
  SnapshotProxyConnection send;
  send.nccl_comm = "1852e9190e780d2a";
  send.rank = 1;
  send.nranks = 8;
  send.channel = 3;
  send.peer = 2;
  send.dir = "send";
  send.ops = 12;
  send.ops_done = 11;
  send.untracked_ops = 1;
  send.steps = {96, 96, 95, 90};
  send.moved_s_ago = {std::optional<double>(4.5), 4.5, 4.25, 9.0};
  SnapshotProxyConnection recv = send;
  recv.dir = "recv";
  recv.peer = 0;
  recv.steps = {96, 90, 90, 90};
  recv.moved_s_ago = {std::optional<double>(4.5), std::nullopt, 9.0, 9.0};
  p.connections = {send, recv};
  p.kernel_channels.push_back({"1852e9190e780d2a", 3, 12, 11, 4.5, 9.0});
  p.kernel_channels.push_back({"1852e9190e780d2a", 4, 0, 0, std::nullopt, std::nullopt});
  p.dropped_connections = 3;
  p.dropped_kernel_channels = 1;
  return p;
}

}  // namespace

TEST_CASE("WatchdogSnapshotRoundTrips") {
  WatchdogSnapshot s = test::richSnapshot();
  s.progress = sampleProgress();

  auto back = watchdogSnapshotFromJson(toJson(s));
  REQUIRE(back.ok());
  CHECK(toJson(*back) == toJson(s));
  CHECK(back->comms[0].nccl_id == "1852e9190e780d2a");
  CHECK(back->comms[0].address == "0x55d0c0a01000");
  CHECK(toJson(s)["comms"][1]["nccl_id"].is_null());  // unknown is null, not ""
  REQUIRE(back->progress);
  CHECK(back->progress->connections[0].steps == std::array<uint64_t, 4>{96, 96, 95, 90});
  CHECK(back->progress->connections[1].moved_s_ago[1] == std::nullopt);
  CHECK(back->progress->kernel_channels[0].stopped == 11u);
  CHECK(back->progress->dropped_connections == 3u);
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
  CHECK_FALSE(sparse->progress);
  auto wrong = watchdogSnapshotFromJson(nlohmann::json{{"streams", "not a list"}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("streams") != std::string::npos);
}

TEST_CASE("ProxyStagesAreNamedPerDirectionInTheSnapshot") {
  WatchdogSnapshot s;
  s.progress = sampleProgress();
  const nlohmann::json j = toJson(s)["progress"]["connections"];
  CHECK(j[0]["steps"] == nlohmann::json{{"posted", 96}, {"filled", 96}, {"sent", 95}, {"done", 90}});
  CHECK(j[1]["steps"] == nlohmann::json{{"posted", 96}, {"arrived", 90}, {"delivered", 90}, {"done", 90}});
  CHECK(j[1]["moved_s_ago"]["arrived"].is_null());
  CHECK(proxyStageIndex("delivered") == 2);
  CHECK(proxyStageIndex("nonsense") == -1);
  // A progress section of the wrong shape is an error, not silently empty.
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"progress", 3}}).ok());
  CHECK_FALSE(watchdogSnapshotFromJson(nlohmann::json{{"progress", {{"connections", {{{"steps", 5}}}}}}}).ok());
}
