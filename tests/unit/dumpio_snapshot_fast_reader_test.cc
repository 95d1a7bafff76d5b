#include <catch2/catch.hpp>
#include <string>

#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"
#include "sample_records.h"

using hangwatch::WatchdogSnapshot;
using hangwatch::dumpio::SnapshotReadOptions;
using hangwatch::dumpio::watchdogSnapshotFromTextFast;
using hangwatch::test::richSnapshot;

TEST_CASE("FastSnapshotReaderGivesTheSameSnapshotAsTheCommonReader") {
  hangwatch::WatchdogSnapshot suspect = richSnapshot();
  suspect.suspect = hangwatch::SuspectState{3, 4.25};
  for (int indent : {-1, 2}) {
   for (const hangwatch::WatchdogSnapshot& snapshot : {richSnapshot(), suspect}) {
    const nlohmann::json written = hangwatch::toJson(snapshot);
    auto slow = hangwatch::watchdogSnapshotFromJson(written);
    auto fast = watchdogSnapshotFromTextFast(written.dump(indent));
    REQUIRE(slow.ok());
    REQUIRE(fast.ok());
    CHECK(hangwatch::toJson(*fast) == hangwatch::toJson(*slow));
   }
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

TEST_CASE("BothSnapshotReadersRefuseTheSameWrongShapes") {
  // One field list drives both readers: what one refuses, the other must refuse too.
  for (const char* text : {R"({"identity": 7})", R"({"identity": {"rank": true}})", R"({"comms": [5]})",
                           R"({"trigger": "x"})", R"({"streams": "not a list"})", R"({"progress": 3})",
                           R"({"health": []})", R"({"progress": {"connections": [{"steps": {"sent": "x"}}]}})",
                           R"({"comms": [null]})", R"({"identity": {"pid": 1.5}})"}) {
    INFO(text);
    auto fast = watchdogSnapshotFromTextFast(text);
    auto common = hangwatch::watchdogSnapshotFromJson(nlohmann::json::parse(text));
    REQUIRE_FALSE(fast.ok());
    REQUIRE_FALSE(common.ok());
    CHECK(fast.error() == common.error());
  }
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
