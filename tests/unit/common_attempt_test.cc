// Attempts of a restarted job (common/attempt.h): the launch key every rank of a launch
// computes alike, the folder each launch claims, and how the report picks one.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdlib.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/attempt.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/trigger_record.h"
#include "test_env.h"

using namespace hangwatch;
namespace fs = std::filesystem;

using test_support::TempDir;
using test_support::envOf;

namespace {

AttemptClaim claimOf(const std::string& job, const std::string& key, double started, int rank = 0) {
  AttemptClaim c;
  c.job_dir = job;
  c.job_id = "j";
  c.launch.key = key;
  c.started_unix_s = started;
  c.host = "node0";
  c.pid = 1000 + rank;
  c.rank = rank;
  return c;
}

std::string claimed(const AttemptClaim& c) {
  Expected<ClaimedAttempt> a = claimAttempt(c);
  REQUIRE(a.ok());
  return a->dir;
}

void trigger(const std::string& dir, double time) {
  TriggerRecord t;
  t.rank = 0;
  t.time_unix_s = time;
  t.reason = "timeout";
  REQUIRE(createFileExclusively(triggerPath(dir), toJson(t).dump()).ok());
}

}  // namespace

TEST_CASE("LaunchKeyComesFromTheLaunchersRestartCountersAndLaunchIds") {
  CHECK(launchKeyFromEnv(envOf({})).key.empty());
  LaunchKey torch = launchKeyFromEnv(envOf({{"TORCHELASTIC_RESTART_COUNT", "2"}, {"TORCHELASTIC_RUN_ID", "r"}}));
  CHECK(torch.key == "restart-2");
  CHECK(torch.restart == 2);
  CHECK(launchKeyFromEnv(envOf({{"SLURM_STEP_ID", "0"}})).key == "step-0");
  LaunchKey requeued = launchKeyFromEnv(envOf({{"SLURM_STEP_ID", "3"}, {"SLURM_RESTART_COUNT", "1"}}));
  CHECK(requeued.key == "step-3.requeue-1");
  CHECK(requeued.restart == 1);
  // torchrun under srun: both counters, so a requeue and a torchrun restart are both new launches.
  CHECK(launchKeyFromEnv(envOf({{"SLURM_STEP_ID", "0"}, {"TORCHELASTIC_RESTART_COUNT", "1"}})).key ==
        "step-0.restart-1");
  CHECK(launchKeyFromEnv(envOf({{"OMPI_MCA_ess_base_jobid", "77"}, {"PMIX_NAMESPACE", "1224343553"}})).key ==
        "mpi-1224343553");
  CHECK(launchKeyFromEnv(envOf({{"OMPI_MCA_ess_base_jobid", "77"}})).key == "mpi-77");
  // A counter that is not a count is not one.
  CHECK(launchKeyFromEnv(envOf({{"TORCHELASTIC_RESTART_COUNT", "x"}})).key.empty());
}

TEST_CASE("ProcessStartIsInThePastAndStable") {
  double a = processStartUnixS();
  double b = processStartUnixS();
  CHECK(std::abs(a - b) < 0.05);
  CHECK(a <= static_cast<double>(::time(nullptr)) + 1);
  CHECK(a > 1.6e9);
}

TEST_CASE("AttemptRecordRoundTrips") {
  AttemptRecord a;
  a.job_id = "j";
  a.name = "restart-1";
  a.key = "restart-1";
  a.restart = 1;
  a.started_unix_s = 1795614445.25;
  a.host = "node-3";
  a.pid = 4242;
  a.rank = 7;
  Expected<AttemptRecord> back = attemptFromJson(nlohmann::json::parse(toJson(a).dump()));
  REQUIRE(back.ok());
  CHECK(back->name == a.name);
  CHECK(back->key == a.key);
  CHECK(back->restart == 1);
  CHECK(back->started_unix_s == a.started_unix_s);
  CHECK(back->host == a.host);
  CHECK(back->pid == a.pid);
  CHECK(back->rank == 7);
  CHECK_FALSE(attemptFromJson(nlohmann::json::parse(R"({"started_unix_s": "soon"})")).ok());
}

TEST_CASE("TheFirstLaunchKeepsTheJobFolderAndEveryRankOfItAgrees") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  CHECK(claimed(claimOf(job, "mpi-1", 100, 0)) == job);
  CHECK(claimed(claimOf(job, "mpi-1", 101, 5)) == job);
  std::ifstream in(attemptRecordPath(job));
  Expected<AttemptRecord> rec =
      attemptFromJson(nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {})));
  REQUIRE(rec.ok());
  CHECK(rec->rank == 0);
  CHECK(rec->name == "mpi-1");
}

TEST_CASE("ALaterLaunchWithAnotherKeyGetsAFolderOfItsOwn") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  CHECK(claimed(claimOf(job, "restart-0", 100)) == job);
  trigger(job, 200);
  CHECK(claimed(claimOf(job, "restart-1", 300)) == job + "/attempts/restart-1");
  CHECK(claimed(claimOf(job, "restart-1", 301, 3)) == job + "/attempts/restart-1");
  // A healthy earlier launch with another key: apart as well.
  CHECK(claimed(claimOf(job, "restart-2", 400)) == job + "/attempts/restart-2");
}

TEST_CASE("ALaunchReusingAKeyAfterAHangIsToldApartByTime") {
  // The same torchrun command run again under the same --rdzv-id counts restarts from 0 again.
  TempDir dir;
  const std::string job = dir.path + "/j";
  CHECK(claimed(claimOf(job, "restart-0", 100)) == job);
  trigger(job, 150);
  // Ranks of the first launch still find their folder (its trigger came after they started).
  CHECK(claimed(claimOf(job, "restart-0", 101, 2)) == job);
  CHECK(claimed(claimOf(job, "restart-0", 200)) == job + "/attempts/restart-0.2");
  trigger(job + "/attempts/restart-0.2", 250);
  CHECK(claimed(claimOf(job, "restart-0", 300)) == job + "/attempts/restart-0.3");
  CHECK(claimed(claimOf(job, "restart-0", 301, 1)) == job + "/attempts/restart-0.3");
}

TEST_CASE("LaunchesWithoutAKeyAreToldApartByTheirTriggers") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  CHECK(claimed(claimOf(job, "", 100)) == job);
  trigger(job, 150);
  CHECK(claimed(claimOf(job, "", 200)) == job + "/attempts/run.2");
}

TEST_CASE("AJobFolderOfAnOlderHangwatchIsAnAttemptWithoutARecord") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  trigger(job, 150);
  REQUIRE(writeFileAtomically(watchdogSnapshotPath(job, 0), "{}").ok());
  std::string mine = claimed(claimOf(job, "mpi-9", 200));
  CHECK(mine != job);
  std::vector<AttemptEntry> all = listAttempts(job);
  REQUIRE(all.size() == 2);
  CHECK(all[0].dir == job);
  CHECK_FALSE(all[0].record.has_value());
  CHECK(all[1].dir == mine);
}

TEST_CASE("RanksOfTwoLaunchesRacingForTheFolderSplitByLaunch") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  constexpr int kRanks = 16;
  std::vector<std::string> got(kRanks);
  std::barrier start(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      start.arrive_and_wait();
      Expected<ClaimedAttempt> a = claimAttempt(claimOf(job, r % 2 ? "mpi-odd" : "mpi-even", 100, r));
      got[r] = a ? a->dir : "error: " + a.error();
    });
  }
  for (auto& t : ranks) t.join();
  std::set<std::string> even, odd;
  for (int r = 0; r < kRanks; ++r) (r % 2 ? odd : even).insert(got[r]);
  INFO("even: " << fmt::format("{}", fmt::join(even, " ")) << "\nodd: " << fmt::format("{}", fmt::join(odd, " ")));
  REQUIRE(even.size() == 1);
  REQUIRE(odd.size() == 1);
  CHECK(*even.begin() != *odd.begin());
  CHECK((*even.begin() == job || *odd.begin() == job));
}

TEST_CASE("TheReportPicksTheNewestAttemptOrTheOneAskedFor") {
  TempDir dir;
  const std::string job = dir.path + "/j";
  claimed(claimOf(job, "restart-0", 100));
  trigger(job, 150);
  std::string second = claimed(claimOf(job, "restart-1", 200));
  Expected<ChosenAttempt> newest = chooseAttempt(job);
  REQUIRE(newest.ok());
  CHECK(newest->entry.dir == second);
  CHECK(newest->number == 2);
  CHECK(newest->count == 2);
  Expected<ChosenAttempt> first = chooseAttempt(job, "1");
  REQUIRE(first.ok());
  CHECK(first->entry.dir == job);
  CHECK(first->entry.name() == "restart-0");
  Expected<ChosenAttempt> named = chooseAttempt(job, "restart-1");
  REQUIRE(named.ok());
  CHECK(named->entry.dir == second);
  // An attempt's own folder is understood as that attempt.
  Expected<ChosenAttempt> by_folder = chooseAttempt(second);
  REQUIRE(by_folder.ok());
  CHECK(by_folder->entry.dir == fs::path(second).lexically_normal().string());
  CHECK(by_folder->number == 2);
  CHECK_FALSE(chooseAttempt(job, "3").ok());
  Expected<ChosenAttempt> unknown = chooseAttempt(job, "restart-7");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().find("restart-0, restart-1") != std::string::npos);
}

TEST_CASE("AFolderWithNothingInItIsOneAttempt") {
  TempDir dir;
  Expected<ChosenAttempt> none = chooseAttempt(dir.path + "/nothing-here");
  REQUIRE(none.ok());
  CHECK(none->count == 1);
  CHECK(none->entry.dir == dir.path + "/nothing-here");
}
