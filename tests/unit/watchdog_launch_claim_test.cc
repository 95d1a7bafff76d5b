// The attempt folder is claimed once per node and launch (launch_claim.h): the node's first
// rank claims, the others take its claim from the board without a look-up of their own.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "hangwatch/watchdog/launch_claim.h"
#include "hangwatch/watchdog/node_share.h"
#include "test_env.h"

using namespace hangwatch;
using namespace hangwatch::watchdog;

namespace launch_claim_test {

NodeClaim claimOf(const std::string& dir, const std::string& gave_up = "") {
  AttemptRecord r;
  r.job_id = "job";
  r.name = "mpi-7";
  r.key = "mpi-7";
  r.host = "node-0";
  r.pid = 4242;
  r.rank = 3;
  r.started_unix_s = 1795000000.5;
  return {ClaimedAttempt{dir, r}, gave_up};
}

}  // namespace launch_claim_test

using launch_claim_test::claimOf;

TEST_CASE("TheNodesFirstRankClaimsAndTheOthersTakeItsClaimWithoutALookUp") {
  test_support::TempDir shm;
  const std::string path = LaunchClaim::boardPath(shm.path, "/dumps/job", "mpi-7", "node-0", ::getppid());
  REQUIRE_FALSE(path.empty());
  int claims = 0;
  auto claim = [&] {
    ++claims;
    return claimOf("/dumps/job/attempts/mpi-7", "stalled: no answer in 10 s");
  };
  LaunchClaim::Outcome first = LaunchClaim::claimOnce(path, claim, 5);
  CHECK_FALSE(first.from_board);
  LaunchClaim::Outcome second = LaunchClaim::claimOnce(path, claim, 5);
  CHECK(second.from_board);
  CHECK(claims == 1);
  CHECK(second.claim.attempt.dir == "/dumps/job/attempts/mpi-7");
  CHECK(second.claim.attempt.record.key == "mpi-7");
  CHECK(second.claim.attempt.record.pid == 4242);
  CHECK(second.claim.attempt.record.rank == std::optional<int>(3));
  CHECK(second.claim.attempt.record.started_unix_s == first.claim.attempt.record.started_unix_s);
  CHECK(second.claim.gave_up == "stalled: no answer in 10 s");
}

TEST_CASE("RanksThatStartTogetherWaitForTheOneClaimUnderWay") {
  test_support::TempDir shm;
  const std::string path = LaunchClaim::boardPath(shm.path, "/dumps/job", "mpi-7", "node-0", ::getppid());
  std::atomic<int> claims{0};
  auto slow_claim = [&] {
    ++claims;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return claimOf("/dumps/job");
  };
  std::vector<std::thread> ranks;
  std::atomic<int> from_board{0};
  for (int i = 0; i < 4; ++i)
    ranks.emplace_back([&] {
      if (LaunchClaim::claimOnce(path, slow_claim, 5).from_board) ++from_board;
    });
  for (std::thread& t : ranks) t.join();
  CHECK(claims.load() == 1);
  CHECK(from_board.load() == 3);
}

TEST_CASE("AClaimerThatDiedIsTakenOverNotWaitedFor") {
  test_support::TempDir shm;
  const std::string path = LaunchClaim::boardPath(shm.path, "/dumps/job", "mpi-7", "node-0", ::getppid());
  // A child takes the claim and dies inside it (SIGKILL on a stalled mount, say).
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    LaunchClaim::claimOnce(path, [] { ::_exit(0); return claimOf("never"); }, 5);
    ::_exit(1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  int claims = 0;
  const auto t0 = std::chrono::steady_clock::now();
  LaunchClaim::Outcome got = LaunchClaim::claimOnce(path, [&] { ++claims; return claimOf("/dumps/job"); }, 30);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(claims == 1);
  CHECK_FALSE(got.from_board);
  CHECK(got.claim.attempt.dir == "/dumps/job");
  CHECK(LaunchClaim::claimOnce(path, [&] { ++claims; return claimOf("x"); }, 5).from_board);
}

TEST_CASE("WithoutALaunchKeyOrABoardEveryRankClaimsForItself") {
  test_support::TempDir shm;
  CHECK(LaunchClaim::boardPath(shm.path, "/dumps/job", "", "node-0", ::getppid()).empty());
  int claims = 0;
  auto claim = [&] {
    ++claims;
    return claimOf("/dumps/job");
  };
  CHECK_FALSE(LaunchClaim::claimOnce("", claim, 5).from_board);
  CHECK_FALSE(LaunchClaim::claimOnce(shm.path + "/no/such/dir/board", claim, 5).from_board);
  CHECK(claims == 2);
}

TEST_CASE("EachLaunchHostAndLauncherProcessHasABoardOfItsOwn") {
  const std::string a = LaunchClaim::boardPath("/dev/shm", "/dumps/job", "restart-0", "node-0", ::getppid());
  CHECK(a.rfind("/dev/shm/hwclaim-", 0) == 0);
  CHECK(a == LaunchClaim::boardPath("/dev/shm", "/dumps/./job", "restart-0", "node-0", ::getppid()));
  CHECK(a != LaunchClaim::boardPath("/dev/shm", "/dumps/job", "restart-1", "node-0", ::getppid()));
  CHECK(a != LaunchClaim::boardPath("/dev/shm", "/dumps/job", "restart-0", "node-1", ::getppid()));
  CHECK(a != LaunchClaim::boardPath("/dev/shm", "/dumps/job", "restart-0", "node-0", ::getpid()));
  CHECK(a != LaunchClaim::boardPath("/dev/shm", "/dumps/other", "restart-0", "node-0", ::getppid()));
}
