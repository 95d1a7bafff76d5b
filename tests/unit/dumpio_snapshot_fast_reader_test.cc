#include <catch2/catch.hpp>
#include <string>

#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

using hangwatch::WatchdogSnapshot;
using hangwatch::dumpio::SnapshotReadOptions;
using hangwatch::dumpio::watchdogSnapshotFromTextFast;

namespace {

// Every field the watchdog writes, with strings that need escaping.
WatchdogSnapshot richSnapshot() {
  WatchdogSnapshot s;
  s.time_unix_s = 1795266000.05;
  s.timeout_s = 300;
  s.detected_here = true;
  s.identity.rank = 7;
  s.identity.local_rank = 3;
  s.identity.world_size = 16;
  s.identity.rank_source = "RANK";
  s.identity.host = "node\"01\"";
  s.identity.pid = 4242;
  s.identity.job_id = "job\t1";
  s.identity.device = 3;
  s.identity.cuda_visible_devices = "0,1,2,3";
  hangwatch::TriggerRecord t;
  t.rank = 1;
  t.host = "node00";
  t.pid = 99;
  t.time_unix_s = 1795265999.5;
  t.reason = "timeout";
  t.stuck_op = hangwatch::StuckOp{"ncclAllReduce", "00000000deadbeef", 10, 4096, std::nullopt, "0x10", 3.5};
  s.trigger = t;
  s.comms.push_back({"00000000deadbeef", 7, 16, 3, "live", 10, 9, "1852e9190e780d2a", "0x55d0c0a01000"});
  s.comms.push_back({"0000000000000001", 0, 2, 3, "destroyed", std::nullopt, std::nullopt, "", "0x55d0c0a02000"});
  hangwatch::SnapshotStream st;
  st.stream = "0x10";
  st.device = 3;
  st.pending.push_back({"ncclAllReduce", "collective", "00000000deadbeef", 10, 4096, "float32", 1024, std::nullopt,
                        3.5, 3.6, true});
  st.pending.push_back({"ncclSend", "p2p", "00000000deadbeef", std::nullopt, 64, "uint8", 64, 3, 0, 3.4, false});
  s.streams.push_back(st);
  s.streams.push_back({"0x20", std::nullopt, {}});
  s.host_calls.push_back({"ncclGroupEnd", 4243, "python", 4.0, "00000000deadbeef", 11});
  s.health = {1, 100, 98, 2, 5};
  hangwatch::SnapshotProgress p;
  p.plugin_inits = 2;
  hangwatch::SnapshotProxyConnection c;
  c.nccl_comm = "1852e9190e780d2a";
  c.rank = 7;
  c.nranks = 16;
  c.channel = 1;
  c.peer = 8;
  c.dir = "recv";
  c.ops = 4;
  c.ops_done = 3;
  c.steps = {32, 30, 30, 29};
  c.moved_s_ago = {std::optional<double>(1.5), std::nullopt, 2.0, 2.25};
  p.connections.push_back(c);
  c.dir = "send";
  c.peer = 6;
  c.untracked_ops = 2;
  p.connections.push_back(c);
  p.kernel_channels.push_back({"1852e9190e780d2a", 1, 4, 3, 1.5, std::nullopt});
  p.dropped_connections = 1;
  s.progress = p;
  return s;
}

}  // namespace

TEST_CASE("FastSnapshotReaderGivesTheSameSnapshotAsTheCommonReader") {
  for (int indent : {-1, 2}) {
    const nlohmann::json written = hangwatch::toJson(richSnapshot());
    auto slow = hangwatch::watchdogSnapshotFromJson(written);
    auto fast = watchdogSnapshotFromTextFast(written.dump(indent));
    REQUIRE(slow.ok());
    REQUIRE(fast.ok());
    CHECK(hangwatch::toJson(*fast) == hangwatch::toJson(*slow));
  }
}

TEST_CASE("FastSnapshotReaderKeepsDefaultsForMissingAndNullFields") {
  auto s = watchdogSnapshotFromTextFast(R"({"identity": {"rank": 5, "host": null}, "trigger": null, "comms": null})");
  REQUIRE(s.ok());
  CHECK(s->identity.rank == std::optional<int>(5));
  CHECK(s->identity.host.empty());
  CHECK_FALSE(s->trigger);
  CHECK(s->comms.empty());
  CHECK(s->schema_version == 1);
  CHECK_FALSE(s->progress);
  auto nulls = watchdogSnapshotFromTextFast(R"({"progress": {"connections": [{"dir": "send", "steps": null}]}})");
  REQUIRE(nulls.ok());
  CHECK(nulls->progress->connections[0].steps[0] == 0u);
}

TEST_CASE("FastSnapshotReaderRefusesWhatTheCommonReaderOnlyTolerates") {
  // The report falls back to the common reader for these, so both must be refused here.
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"identity": 7})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"identity": {"rank": true}})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"comms": [5]})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"trigger": "x"})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"streams": "not a list"})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"progress": 3})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"progress": {"connections": [{"steps": {"sent": "x"}}]}})").ok());
  CHECK_FALSE(watchdogSnapshotFromTextFast(R"({"comms": []})", SnapshotReadOptions{.require_identity = true}).ok());
  CHECK(watchdogSnapshotFromTextFast(R"({"identity": {}})", SnapshotReadOptions{.require_identity = true}).ok());
}

TEST_CASE("FastSnapshotReaderRejectsEveryTruncationOfASnapshot") {
  const std::string text = hangwatch::toJson(richSnapshot()).dump();
  for (size_t len = 0; len < text.size(); ++len) {
    INFO(len);
    CHECK_FALSE(watchdogSnapshotFromTextFast(std::string_view(text).substr(0, len)).ok());
  }
  CHECK_FALSE(watchdogSnapshotFromTextFast(text + " {}").ok());
}
