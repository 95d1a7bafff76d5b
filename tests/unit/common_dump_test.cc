#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/common/trigger_record.h"
#include "test_env.h"

using test_support::envOf;


TEST_CASE("JobIdFollowsTheDesignOrder") {
  using hangwatch::jobIdFromEnv;
  CHECK(jobIdFromEnv(envOf({{"HANGWATCH_JOB_ID", "mine"}, {"SLURM_JOB_ID", "42"}})) == "mine");
  CHECK(jobIdFromEnv(envOf({{"SLURM_JOB_ID", "42"}, {"TORCHELASTIC_RUN_ID", "te"}})) == "42");
  CHECK(jobIdFromEnv(envOf({{"TORCHELASTIC_RUN_ID", "te"}, {"OMPI_MCA_ess_base_jobid", "7"}})) == "te");
  CHECK(jobIdFromEnv(envOf({{"OMPI_MCA_ess_base_jobid", "123456"}})) == "123456");
  CHECK(jobIdFromEnv(envOf({})).rfind("local-", 0) == 0);
}

TEST_CASE("JobIdCannotEscapeTheDumpDirectory") {
  CHECK(hangwatch::jobIdFromEnv(envOf({{"HANGWATCH_JOB_ID", "../etc/x y"}})) == ".._etc_x_y");
  CHECK(hangwatch::jobIdFromEnv(envOf({{"HANGWATCH_JOB_ID", ".."}})) == "_");
}

TEST_CASE("DumpPathsMatchTheContractLayout") {
  std::string job = hangwatch::jobDirFromEnv(envOf({{"HANGWATCH_DUMP_DIR", "/shared/dumps/"}, {"SLURM_JOB_ID", "9"}}));
  CHECK(job == "/shared/dumps/9");
  CHECK(hangwatch::jobDirFromEnv(envOf({{"SLURM_JOB_ID", "9"}})) == "./hangwatch-dumps/9");
  CHECK(hangwatch::triggerPath(job) == "/shared/dumps/9/TRIGGER.json");
  CHECK(hangwatch::watchdogSnapshotPath(job, 7) == "/shared/dumps/9/ranks/r00007.watchdog.json");
  CHECK(hangwatch::forensicsDumpPath(job, 123456) == "/shared/dumps/9/ranks/r123456.forensics.json");
  CHECK(hangwatch::forensicsDumpPathForPid(job, 4242) == "/shared/dumps/9/ranks/p4242.forensics.json");
  CHECK(hangwatch::metricsPath(job, 0) == "/shared/dumps/9/metrics/r00000.jsonl");
  CHECK(hangwatch::rankStatePath(job, 7) == "/shared/dumps/9/ranks/r00007.state.json");
  CHECK(hangwatch::triggerBeaconPath(job) == "/shared/dumps/9/TRIGGER.beacon");
  CHECK(hangwatch::timelinePath(job, 3) == "/shared/dumps/9/timeline/r00003.json");
}

TEST_CASE("RankFileNamesAreRecognisedFromTheNameTheWriterGives") {
  using hangwatch::RankFileKind;
  const std::string job = "/j";
  const std::pair<std::string, RankFileKind> written[] = {
      {hangwatch::watchdogSnapshotPath(job, 7), RankFileKind::kWatchdogSnapshot},
      {hangwatch::forensicsDumpPath(job, 123456), RankFileKind::kForensicsDump},
      {hangwatch::rankStatePath(job, 0), RankFileKind::kRankState},
      {hangwatch::metricsPath(job, 42), RankFileKind::kMetrics},
      {hangwatch::timelinePath(job, 9), RankFileKind::kTimeline},
      {hangwatch::suspectSnapshotPath(job, 3), RankFileKind::kSuspectSnapshot},
      {hangwatch::rasAnswerPath(job, 5), RankFileKind::kRasAnswer}};
  const int ranks[] = {7, 123456, 0, 42, 9, 3, 5};
  for (size_t i = 0; i < std::size(written); ++i) {
    const std::string name = std::filesystem::path(written[i].first).filename().string();
    auto f = hangwatch::parseRankFileName(name);
    INFO(name);
    REQUIRE(f);
    CHECK(f->rank == ranks[i]);
    CHECK(f->kind == written[i].second);
  }
  for (const char* other : {"r.watchdog.json", "p42.forensics.json", "r00007.watchdog.json.tmp.1.2", "r1234567890.jsonl",
                            "x00007.jsonl", "r00007.watchdog", "r00007", "r", ""})
    CHECK_FALSE(hangwatch::parseRankFileName(other));
  CHECK(hangwatch::suspectPath(job) == "/j/SUSPECT.json");
  CHECK(hangwatch::suspectPath(job, 3) == "/j/SUSPECT.3.json");
  CHECK(hangwatch::isDumpByHandName("p4242.forensics.json"));
  CHECK_FALSE(hangwatch::isDumpByHandName("r00001.forensics.json"));
}

TEST_CASE("TriggerRecordRoundTrips") {
  hangwatch::TriggerRecord t;
  t.rank = 3;
  t.host = "node17";
  t.pid = 4321;
  t.time_unix_s = 1790000000.25;
  t.reason = "timeout";
  t.stuck_op = hangwatch::StuckOp{"ncclAllReduce", "0x1a2b", 10, 4096, std::nullopt, "0x7f00", 3.5};
  auto back = hangwatch::triggerFromJson(nlohmann::json::parse(hangwatch::toJson(t).dump()));
  REQUIRE(back.ok());
  CHECK(back->rank == 3);
  CHECK(back->host == "node17");
  CHECK(back->pid == 4321);
  CHECK(back->time_unix_s == 1790000000.25);
  REQUIRE(back->stuck_op);
  CHECK(back->stuck_op->op == "ncclAllReduce");
  CHECK(back->stuck_op->seq == 10u);
  CHECK_FALSE(back->stuck_op->peer);
  CHECK(back->stuck_op->age_s == 3.5);
}

TEST_CASE("ManualTriggerHasNoRankAndNoOp") {
  hangwatch::TriggerRecord t;
  t.reason = "manual";
  auto back = hangwatch::triggerFromJson(hangwatch::toJson(t));
  REQUIRE(back.ok());
  CHECK_FALSE(back->rank);
  CHECK_FALSE(back->stuck_op);
}

TEST_CASE("TriggerReaderRejectsWrongTypesWithAMessage") {
  auto bad = hangwatch::triggerFromJson(nlohmann::json::parse(R"({"rank": "three"})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().find("TRIGGER.json") != std::string::npos);
  CHECK_FALSE(hangwatch::triggerFromJson(nlohmann::json::array()).ok());
}

TEST_CASE("IntegerFieldsThatDoNotFitAreErrorsNotCasts") {
  // Found by tests/fuzz: a float beyond the range of an int field was a plain cast (UB).
  for (const char* text : {R"({"pid": 1e30})", R"({"rank": 3.5})", R"({"rank": 4294967296})",
                           R"({"pid": 18446744073709551615})", R"({"rank": -1e300})"}) {
    INFO(text);
    CHECK_FALSE(hangwatch::triggerFromJson(nlohmann::json::parse(text)).ok());
  }
  auto whole = hangwatch::triggerFromJson(nlohmann::json::parse(R"({"rank": 3.0, "pid": 4096})"));
  REQUIRE(whole.ok());
  CHECK(whole.value().rank == 3);
  CHECK(whole.value().pid == 4096);
}

TEST_CASE("ThreadStackRoundTripsWithBothFrameKinds") {
  hangwatch::ThreadStack t;
  t.tid = 77;
  t.name = "MainThread";
  t.os_name = "python3";
  t.state = "S";
  t.frames.push_back({hangwatch::FrameKind::kNative, "pthread_cond_wait", "", std::nullopt, "/lib/libc.so.6",
                      0x7f0012345678, 0x8a678});
  t.frames.push_back({hangwatch::FrameKind::kPython, "step", "train.py", 88, "", std::nullopt, std::nullopt});
  t.merge_note = "";
  auto back = hangwatch::schema::fromJson<hangwatch::ThreadStack>(nlohmann::json::parse(hangwatch::toJson(t).dump()));
  REQUIRE(back.ok());
  REQUIRE(back->frames.size() == 2);
  CHECK(back->frames[0].kind == hangwatch::FrameKind::kNative);
  CHECK(back->frames[0].pc == 0x7f0012345678u);
  CHECK(back->frames[0].offset == 0x8a678u);
  CHECK(back->frames[1].kind == hangwatch::FrameKind::kPython);
  CHECK(back->frames[1].file == "train.py");
  CHECK(back->frames[1].line == 88);
  CHECK(hangwatch::toJson(t)["frames"][1]["kind"] == "python");
}

TEST_CASE("UnknownFrameKindIsAnError") {
  auto bad = hangwatch::schema::fromJson<hangwatch::StackFrame>(nlohmann::json::parse(R"({"kind": "cuda", "function": "f"})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().find("cuda") != std::string::npos);
}
