#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

std::vector<FakeRank> deadLinkJob(int world, int from) {
  return verdict_test::ringJob(
      world, 10, 2, [from](int f, int) -> std::optional<uint64_t> { return f == from ? 50 : 54; },
      [from](int f, int) -> std::optional<uint64_t> { return f == from ? 50 : 53; });
}

void truncateFile(const std::string& path) {
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 2);
}

bool anyProblemMentions(const JobData& j, const std::string& text) {
  for (const std::string& p : j.problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("MissingDirectoryIsAnError") {
  CHECK_FALSE(JobLoader().load("/nonexistent/hangwatch/job").ok());
}

TEST_CASE("DeletedAndTruncatedRankFilesAreListedAndTheCulpritIsStillFound") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadLinkJob(8, 1)) r.write(dir.path);
  verdict_test::writeTrigger(dir.path, 2, 10);
  std::filesystem::remove(watchdogSnapshotPath(dir.path, 5));
  std::filesystem::remove(forensicsDumpPath(dir.path, 5));
  truncateFile(watchdogSnapshotPath(dir.path, 3));
  truncateFile(forensicsDumpPath(dir.path, 7));
  Expected<JobData> job = JobLoader(3).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->world_size == 8);
  CHECK(job->ranks_missing == std::vector<int>{5});
  std::vector<std::pair<int, std::string>> partial;
  for (const PartialRank& p : job->ranks_partial) partial.emplace_back(p.rank, p.missing);
  CHECK(partial == std::vector<std::pair<int, std::string>>{{3, "watchdog snapshot"}, {7, "forensics dump"}});
  CHECK(job->ranks_partial[0].reason.find("truncated or corrupt JSON") != std::string::npos);
  Report r = ReportBuilder::build(std::move(*job));
  // Every connection has a reporting end: ranks 4 and 6 report 5's, 6 and 0 report 7's.
  CHECK(r.verdict.kind == VerdictKind::kCommunicationHang);
  CHECK(r.verdict.confident);
  REQUIRE(r.verdict.culprit_link);
  CHECK(r.verdict.culprit_link->from == 1);
  CHECK(r.verdict.culprit_link->to == 2);
}

TEST_CASE("TwoNeighboursWithoutRingProgressLeaveTheirLinkUnseenAndTheVerdictUnsure") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadLinkJob(8, 1)) r.write(dir.path);
  verdict_test::writeTrigger(dir.path, 2, 10);
  std::filesystem::remove(watchdogSnapshotPath(dir.path, 5));
  std::filesystem::remove(forensicsDumpPath(dir.path, 5));
  truncateFile(forensicsDumpPath(dir.path, 6));
  Expected<JobData> job = JobLoader(3).load(dir.path);
  REQUIRE(job.ok());
  Report r = ReportBuilder::build(std::move(*job));
  const Verdict& v = r.verdict;
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  CHECK_FALSE(v.culprit_link);
  std::vector<std::string> suspects;
  for (const Suspect& s : v.suspects) suspects.push_back(s.text);
  CHECK(suspects == std::vector<std::string>{"link 1 -> 2", "link 5 -> 6"});
  std::vector<int> lacking;
  for (const DataGap& g : v.lacking_data) lacking.push_back(g.rank);
  CHECK(lacking == std::vector<int>{5, 6});
  CHECK(v.headline.find("rank 5 did not dump, rank 6 has no forensics dump") != std::string::npos);
}

TEST_CASE("GarbageInEveryFileIsReportedNeverFatal") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 3; ++r) {
    std::ofstream(watchdogSnapshotPath(dir.path, r).c_str()) << "";
  }
  std::filesystem::create_directories(dir.path + "/ranks");
  std::ofstream(watchdogSnapshotPath(dir.path, 0)) << "{\"identity\": 7}";
  std::ofstream(forensicsDumpPath(dir.path, 1)) << "[1,2";
  std::ofstream(watchdogSnapshotPath(dir.path, 2)) << "\x00\xff garbage";
  std::ofstream(triggerPath(dir.path)) << "{\"rank\": \"x\"}";
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->ranks.empty());
  CHECK(job->ranks_missing == std::vector<int>{0, 1, 2});
  CHECK(anyProblemMentions(*job, "TRIGGER.json is unreadable"));
  Report r = ReportBuilder::build(std::move(*job));
  CHECK(r.verdict.kind == VerdictKind::kInconclusive);
}

TEST_CASE("DumpsOfAnotherJobAreSetAsideAndCountAsMissing") {
  verdict_test::TempDir dir;
  auto ranks = deadLinkJob(4, 2);
  ranks[0] = FakeRank(0, 4, 10, "other-job");
  for (const FakeRank& r : ranks) r.write(dir.path);
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->job_id == "job1");
  CHECK(job->ranks_missing == std::vector<int>{0});
  CHECK(anyProblemMentions(*job, "belong to job 'other-job'"));
}

TEST_CASE("HostWhoseClockIsBehindTheTriggerHostIsReported") {
  verdict_test::TempDir dir;
  auto ranks = deadLinkJob(8, 2);
  for (int r = 4; r < 8; ++r) ranks[r].snap.time_unix_s = 1000.5 - 42;  // node1's snapshots predate the trigger
  for (const FakeRank& r : ranks) r.write(dir.path);
  verdict_test::writeTrigger(dir.path, 0, 10, 1000.0);
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  CHECK(anyProblemMentions(*job, "clock skew: host node1 stamped"));
  CHECK_FALSE(anyProblemMentions(*job, "clock skew: host node0"));
  Report r = ReportBuilder::build(std::move(*job));
  REQUIRE(r.verdict.culprit_link);
  CHECK(r.verdict.culprit_link->from == 2);
}

TEST_CASE("ParallelLoadingGivesTheSameRanksAsOneThread") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadLinkJob(16, 9)) r.write(dir.path);
  Expected<JobData> one = JobLoader(1).load(dir.path);
  Expected<JobData> many = JobLoader(4).load(dir.path);
  REQUIRE(one.ok());
  REQUIRE(many.ok());
  REQUIRE(one->ranks.size() == 16);
  REQUIRE(many->ranks.size() == 16);
  for (size_t i = 0; i < 16; ++i) {
    CHECK(many->ranks[i].rank == static_cast<int>(i));
    CHECK(many->ranks[i].ring_progress.size() == one->ranks[i].ring_progress.size());
    CHECK(many->ranks[i].threads.size() == one->ranks[i].threads.size());
  }
}

TEST_CASE("LoadedRankKeepsItsStackLabelsButNotRawFrames") {
  verdict_test::TempDir dir;
  FakeRank r(0, 1, 1);
  r.dump.threads[0].native_frames = r.dump.threads[0].frames;
  r.dump.threads[0].frames[0].module = "/lib/libc.so.6";
  r.dump.threads[0].frames[0].pc = 0x1234;
  r.write(dir.path);
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  const stackmerge::RankThread& t = job->ranks[0].threads[0];
  CHECK(t.name == "ring_train");
  REQUIRE_FALSE(job->stacks->frames(t.stack).empty());
  CHECK(job->stacks->frames(t.stack)[0].label == "simcuda_stream_wait");
}

TEST_CASE("RanksWithTheSameStackShareOneTableEntry") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadLinkJob(8, 3)) r.write(dir.path);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  REQUIRE(job->ranks.size() == 8);
  // Two distinct stacks (main thread, channel thread) however many ranks have them.
  CHECK(job->stacks->size() == 2);
  CHECK(job->ranks[0].threads[0].stack == job->ranks[7].threads[0].stack);
  CHECK(job->ranks[0].threads[0].stack != job->ranks[0].threads[1].stack);
}

TEST_CASE("AnEarlyWarningAloneMakesTheJobSuspectedAndReadsTheSuspectSnapshots") {
  verdict_test::TempDir dir;
  // Rank 2 sits in host code; the others wait in seq 5. Only suspect snapshots exist.
  for (int r = 0; r < 4; ++r) {
    FakeRank rank(r, 4, 5);
    if (r == 2) {
      rank.snap.streams.clear();
      rank.snap.comms[0].last_issued_seq = 4;
      rank.snap.comms[0].last_completed_seq = 4;
    }
    rank.snap.suspect = SuspectState{1, r == 0 ? std::optional<double>(2.5) : std::nullopt};
    REQUIRE(writeFileAtomically(suspectSnapshotPath(dir.path, r), toJson(rank.snap).dump()).ok());
  }
  verdict_test::writeTrigger(dir.path, 1, 5);
  std::filesystem::rename(triggerPath(dir.path), suspectPath(dir.path));
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->stage == Stage::kSuspected);
  CHECK(job->ranks.size() == 4);
  CHECK(job->ranks_partial.empty());  // no collector runs at a warning: nothing is missing
  CHECK(job->suspect.resumed == std::vector<int>{0});
  Report r = ReportBuilder::build(std::move(*job));
  CHECK(r.verdict.kind == VerdictKind::kNonCommunicationHang);
  CHECK(r.verdict.culprit_ranks == std::vector<int>{2});
}

TEST_CASE("ATriggerMakesTheJobAHangWhateverEarlyWarningCameBefore") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 4; ++r) FakeRank(r, 4, 5).write(dir.path);
  verdict_test::writeTrigger(dir.path, 1, 5);
  REQUIRE(createFileExclusively(suspectPath(dir.path), "{}").ok());
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->stage == Stage::kHang);
  Expected<JobData> none = JobLoader(2).load(dir.path + "/ranks");
  REQUIRE(none.ok());
  CHECK(none->stage == Stage::kNone);
}

TEST_CASE("ACollectorOffByConfigurationIsOneSentenceNotAMissingDumpPerRank") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 4; ++r) {
    FakeRank rank(r, 4, 5);
    REQUIRE(writeFileAtomically(watchdogSnapshotPath(dir.path, r), toJson(rank.snap).dump()).ok());
    RankState s;
    s.rank = r;
    s.phase = DumpPhase::kDone;
    s.forensics = "off";
    REQUIRE(writeFileAtomically(rankStatePath(dir.path, r), toJson(s).dump()).ok());
  }
  verdict_test::writeTrigger(dir.path, 1, 5);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->ranks_partial.empty());
  CHECK(job->ranks_missing.empty());
  REQUIRE(job->problems.size() == 1);
  CHECK(job->problems[0].find("the collector was off (HANGWATCH_COLLECT=0) on rank(s) 0-3") != std::string::npos);
}

TEST_CASE("ARankEndedWhileItsCollectorRanSaysWhyItsForensicsDumpIsMissing") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 2; ++r) {
    FakeRank rank(r, 2, 5);
    REQUIRE(writeFileAtomically(watchdogSnapshotPath(dir.path, r), toJson(rank.snap).dump()).ok());
    RankState s;
    s.rank = r;
    s.phase = DumpPhase::kCollecting;
    s.forensics = "pending";
    s.deadline_unix_s = 1.0;  // long past: nobody waits for it
    if (r == 1) s.note = "the launcher's SIGTERM ended the process 20 s after it came while its collector still ran";
    REQUIRE(writeFileAtomically(rankStatePath(dir.path, r), toJson(s).dump()).ok());
  }
  verdict_test::writeTrigger(dir.path, 0, 5);
  Expected<JobData> job = JobLoader(2).load(dir.path);
  REQUIRE(job.ok());
  REQUIRE(job->ranks_partial.size() == 2);
  CHECK(job->ranks_partial[0].reason == "its collector did not finish by its deadline");
  CHECK(job->ranks_partial[1].reason ==
        "its collector did not finish by its deadline: the launcher's SIGTERM ended the process 20 s after it came "
        "while its collector still ran");
}
