#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hangwatch/common/fallback_record.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/verdict/collection_status.h"

#include "hangwatch/forensics/cli/report_command.h"
#include "hangwatch/forensics/cli/split_dumps.h"
#include "verdict_test_fixture.h"

using hangwatch::forensics::ReportCommand;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ranks/rNNNNN.state.json as the watchdog writes it, on this host.
void writeState(const std::string& dir, int rank, hangwatch::DumpPhase phase, int64_t pid, int64_t collector_pid,
                double deadline_in_s) {
  hangwatch::RankState s;
  s.rank = rank;
  s.phase = phase;
  s.pid = pid;
  s.collector_pid = collector_pid;
  s.host = hangwatch::hostName();
  s.deadline_unix_s = hangwatch::verdict::wallClockNow() + deadline_in_s;
  REQUIRE(hangwatch::writeFileAtomically(hangwatch::rankStatePath(dir, rank), toJson(s).dump()).ok());
}

// A pid that surely belongs to no live process: a child we made and reaped.
int64_t deadPid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace

TEST_CASE("ReportUsageErrorsExitTwo") {
  ReportCommand c;
  CHECK(c.run({}) == 2);
  CHECK(c.run({"/tmp", "--format", "pdf"}) == 2);
  CHECK(c.run({"/tmp", "--bogus"}) == 2);
  CHECK(c.run({"/tmp", "/var"}) == 2);
  CHECK(c.run({"/tmp", "--threads", "0"}) == 2);
  CHECK(c.run({"/tmp", "--wait", "-1"}) == 2);
  CHECK(c.run({"/tmp", "--wait", "soon"}) == 2);
}

TEST_CASE("ReportWaitsForARankStillCollectingUntilItIsDone") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 2; ++r) verdict_test::FakeRank(r, 2, 3).write(dir.path);
  std::filesystem::remove(hangwatch::forensicsDumpPath(dir.path, 1));
  writeState(dir.path, 0, hangwatch::DumpPhase::kDone, ::getpid(), 0, 60);
  writeState(dir.path, 1, hangwatch::DumpPhase::kCollecting, ::getpid(), ::getpid(), 60);
  // Rank 1's collector finishes a little later.
  std::thread collector([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    verdict_test::FakeRank(1, 2, 3).write(dir.path);
    writeState(dir.path, 1, hangwatch::DumpPhase::kDone, ::getpid(), 0, 60);
  });
  std::string out = dir.path + "/out.json";
  ReportCommand c;
  int code = c.run({dir.path, "--format=json", "-o", out, "--wait", "30"});
  collector.join();
  REQUIRE(code == 0);
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  CHECK(j.at("ranks_collecting").empty());
  CHECK(j.at("ranks_partial").empty());
}

TEST_CASE("ReportListsRanksStillCollectingWhenTheWaitEnds") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 3; ++r) verdict_test::FakeRank(r, 3, 3).write(dir.path);
  std::filesystem::remove(hangwatch::forensicsDumpPath(dir.path, 2));
  writeState(dir.path, 2, hangwatch::DumpPhase::kCollecting, ::getpid(), ::getpid(), 60);
  std::string out = dir.path + "/out.json";
  ReportCommand c;
  REQUIRE(c.run({dir.path, "--format=json", "-o", out, "--wait", "0.2"}) == 0);
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  CHECK(j.at("ranks_collecting") == nlohmann::json::array({2}));
  bool said = false;
  for (const auto& p : j.at("ranks_partial")) said = said || (p.at("rank") == 2 && p.at("reason") == "still being collected");
  CHECK(said);
  REQUIRE(c.run({dir.path, "-o", dir.path + "/out.txt", "--wait", "0"}) == 0);
  CHECK(slurp(dir.path + "/out.txt").find("STILL COLLECTING: rank(s) 2") != std::string::npos);
}

TEST_CASE("ACollectorThatDiedOrMissedItsDeadlineIsNotWaitedFor") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 3; ++r) verdict_test::FakeRank(r, 3, 3).write(dir.path);
  writeState(dir.path, 0, hangwatch::DumpPhase::kCollecting, deadPid(), deadPid(), 600);  // both gone
  writeState(dir.path, 1, hangwatch::DumpPhase::kCollecting, ::getpid(), ::getpid(), -1);  // past its deadline
  writeState(dir.path, 2, hangwatch::DumpPhase::kCollecting, ::getpid(), 0, 600);  // collector not started, rank alive
  auto status = hangwatch::verdict::readCollectionStatus(dir.path, hangwatch::verdict::wallClockNow(), {0, 1, 2, 3});
  CHECK(status.collecting == std::vector<int>{2});
}

TEST_CASE("ReportOfAMissingDirectoryExitsOne") {
  ReportCommand c;
  CHECK(c.run({"/nonexistent/hangwatch-job"}) == 1);
}

TEST_CASE("ReportWritesTheChosenFormatAndAllThreeUnderReportDir") {
  verdict_test::TempDir dir;
  for (int r = 0; r < 2; ++r) verdict_test::FakeRank(r, 2, 3).write(dir.path);
  std::string out = dir.path + "/out.json";
  ReportCommand c;
  REQUIRE(c.run({dir.path, "--format=json", "-o", out}) == 0);
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  CHECK(j.at("verdict").at("kind") == "inconclusive");
  for (const char* name : {"report.txt", "report.json", "report.html"}) {
    CHECK(std::filesystem::exists(dir.path + "/report/" + name));
  }
}

TEST_CASE("ReportNoSaveAndNonJobDirectoriesLeaveTheDirectoryAlone") {
  verdict_test::TempDir job, plain;
  verdict_test::FakeRank(0, 1, 3).write(job.path);
  ReportCommand c;
  std::string out = job.path + "/../" + std::filesystem::path(job.path).filename().string() + ".txt";
  CHECK(c.run({job.path, "--no-save", "-o", out}) == 0);
  CHECK_FALSE(std::filesystem::exists(job.path + "/report"));
  std::filesystem::remove(out);
  CHECK(c.run({plain.path, "-o", plain.path + "/r.txt"}) == 0);
  CHECK_FALSE(std::filesystem::exists(plain.path + "/report"));
  CHECK(slurp(plain.path + "/r.txt").rfind("VERDICT: INCONCLUSIVE", 0) == 0);
}

namespace {

nlohmann::json reportJson(const std::vector<std::string>& args, const std::string& out) {
  std::vector<std::string> all = args;
  all.insert(all.end(), {"--format", "json", "--wait", "0", "-o", out});
  ReportCommand c;
  REQUIRE(c.run(all) == 0);
  return nlohmann::json::parse(slurp(out));
}

// A job whose ranks 2 and 3 gave the shared folder up: their files are in the node's fallback.
struct SplitJob {
  verdict_test::TempDir shared, local;
  std::string job = shared.path + "/job1";
  std::string fallback = local.path + "/job1";
  SplitJob() {
    std::filesystem::create_directories(job);
    std::filesystem::create_directories(fallback);
    verdict_test::writeTrigger(job, 0, 3);
    for (int r = 0; r < 2; ++r) verdict_test::FakeRank(r, 4, 3).write(job);
    for (int r = 2; r < 4; ++r) verdict_test::FakeRank(r, 4, 3).write(fallback);
    hangwatch::FallbackRecord rec{1, job, "node1", 4242, "stalled: writing x took more than 10 s", 1000};
    REQUIRE(hangwatch::writeFileAtomically(hangwatch::fallbackRecordPath(fallback), toJson(rec).dump()).ok());
  }
};

}  // namespace

TEST_CASE("ReportWithAFallbackFolderReadsTheRanksThatWentThereAndSaysWhere") {
  SplitJob s;
  nlohmann::json alone = reportJson({s.job, "--no-save"}, s.shared.path + "/alone.json");
  CHECK(alone.at("ranks_missing") == nlohmann::json::array({2, 3}));

  // The fallback root or the job's folder in it: the same.
  for (const std::string& given : {s.local.path, s.fallback}) {
    nlohmann::json both = reportJson({s.job, "--fallback", given}, s.shared.path + "/both.json");
    CHECK(both.at("ranks_missing") == nlohmann::json::array());
    CHECK(both.at("job_dir") == s.job);
    std::string notes = both.at("problems").dump();
    CHECK(notes.find("of rank(s) 2-3 come from the fallback folder " + s.fallback +
                     " (host node1: the dump folder was given up: stalled: writing x took more than 10 s)") !=
          std::string::npos);
  }
  // Saved in the job's own folder, and nothing left in the fallback or behind in /tmp.
  CHECK(std::filesystem::exists(s.job + "/report/report.json"));
  CHECK_FALSE(std::filesystem::exists(s.fallback + "/report"));

  // The fallback folder alone says whose it is and how to read both.
  nlohmann::json local = reportJson({s.fallback, "--no-save"}, s.local.path + "/local.json");
  CHECK(local.at("problems").dump().find("is the node-local fallback folder of " + s.job) != std::string::npos);
  CHECK(local.at("ranks_missing") == nlohmann::json::array({0, 1}));
}

TEST_CASE("MergedDumpsReadTheNewestCopyOfAFileAndTheMetricsLinesOfBoth") {
  SplitJob s;
  // Rank 1 began dumping on shared storage, which then stalled: its "done" is in the fallback.
  writeState(s.job, 1, hangwatch::DumpPhase::kCollecting, 11, 0, 60);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  writeState(s.fallback, 1, hangwatch::DumpPhase::kDone, 11, 0, 60);
  std::filesystem::create_directories(s.job + "/metrics");
  std::filesystem::create_directories(s.fallback + "/metrics");
  std::ofstream(s.job + "/metrics/r00001.jsonl") << "{\"w\":1}\n";
  std::ofstream(s.fallback + "/metrics/r00001.jsonl") << "{\"w\":2}\n";
  std::ofstream(s.fallback + "/ranks/r00003.watchdog.json.tmp.77.1") << "{\"half";

  std::string merged_dir;
  {
    auto m = hangwatch::forensics::MergedDumps::make(s.job, {s.fallback});
    REQUIRE(m.ok());
    merged_dir = m->dir();
    CHECK(std::filesystem::path(merged_dir).filename() == "job1");
    CHECK(m->original(merged_dir + "/ranks/r00001.state.json") == s.job + "/ranks/r00001.state.json");
    auto state = hangwatch::readRankState(merged_dir + "/ranks/r00001.state.json");
    REQUIRE(state.ok());
    CHECK(state->done());
    CHECK(slurp(merged_dir + "/metrics/r00001.jsonl") == "{\"w\":1}\n{\"w\":2}\n");
    CHECK_FALSE(std::filesystem::exists(merged_dir + "/ranks/r00003.watchdog.json.tmp.77.1"));
    CHECK(std::filesystem::exists(merged_dir + "/ranks/r00003.watchdog.json"));
  }
  // Gone with the object; what the links pointed to is untouched.
  CHECK_FALSE(std::filesystem::exists(merged_dir));
  CHECK(std::filesystem::exists(s.fallback + "/ranks/r00003.watchdog.json"));
  CHECK(hangwatch::forensics::fallbackJobFolder(s.local.path, s.job) == s.fallback);
  CHECK(hangwatch::forensics::fallbackJobFolder(s.fallback, s.job) == s.fallback);
  CHECK_FALSE(hangwatch::forensics::MergedDumps::make(s.job, {s.local.path + "/nowhere"}).ok());
}
