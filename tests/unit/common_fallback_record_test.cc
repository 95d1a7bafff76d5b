// FALLBACK.json: what a rank that gave its dump folder up leaves in its node-local fallback.
#include <catch2/catch.hpp>

#include <fstream>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/fallback_record.h"
#include "test_env.h"

using namespace hangwatch;
using test_support::TempDir;

TEST_CASE("FallbackRecordRoundTripsEveryFieldThroughItsFile") {
  TempDir dir;
  FallbackRecord r;
  r.primary = "/lustre/dumps/job-7";
  r.host = "node3";
  r.pid = 4321;
  r.why = "stalled: writing /lustre/dumps/job-7/ranks/r00003.watchdog.json took more than 10 s";
  r.time_unix_s = 1790000000.5;
  REQUIRE(writeFileAtomically(fallbackRecordPath(dir.path), toJson(r).dump()).ok());
  CHECK(fallbackRecordPath(dir.path) == dir.path + "/FALLBACK.json");
  Expected<FallbackRecord> back = readFallbackRecord(dir.path);
  REQUIRE(back.ok());
  CHECK(back->schema_version == 1);
  CHECK(back->primary == r.primary);
  CHECK(back->host == "node3");
  CHECK(back->pid == 4321);
  CHECK(back->why == r.why);
  CHECK(back->time_unix_s == 1790000000.5);
}

TEST_CASE("FallbackRecordWithoutItsPrimaryFolderOrTornIsAnError") {
  TempDir dir;
  CHECK_FALSE(readFallbackRecord(dir.path).ok());
  std::ofstream(fallbackRecordPath(dir.path)) << R"({"host": "node3"})";
  CHECK(readFallbackRecord(dir.path).error() == "fallback record: no primary folder");
  std::ofstream(fallbackRecordPath(dir.path)) << R"({"primary": "/lustre/dumps/jo)";
  CHECK(readFallbackRecord(dir.path).error() == "fallback record: truncated or corrupt JSON");
}
