#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/rank_identity.h"
#include "test_env.h"

using test_support::envOf;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("hangwatch-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("RankIdentityFollowsTheDesignOrderOfLaunchers") {
  auto id = hangwatch::detectRankIdentity(envOf({{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"},
                                                 {"OMPI_COMM_WORLD_RANK", "5"}}));
  CHECK(id.rank == 3);
  CHECK(id.local_rank == 1);
  CHECK(id.world_size == 8);
  CHECK(id.source == "RANK");

  id = hangwatch::detectRankIdentity(envOf({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                                            {"SLURM_PROCID", "2"}}));
  CHECK(id.rank == 5);
  CHECK(id.world_size == 6);

  id = hangwatch::detectRankIdentity(envOf({{"SLURM_PROCID", "2"}, {"SLURM_LOCALID", "0"}, {"PMI_RANK", "9"}}));
  CHECK(id.rank == 2);
  CHECK(id.local_rank == 0);

  id = hangwatch::detectRankIdentity(envOf({{"PMI_RANK", "9"}}));
  CHECK(id.rank == 9);
}

TEST_CASE("RankIdentitySkipsMalformedValues") {
  auto id = hangwatch::detectRankIdentity(envOf({{"RANK", "three"}, {"PMI_RANK", "4"}}));
  CHECK(id.rank == 4);
  CHECK_FALSE(hangwatch::detectRankIdentity(envOf({{"RANK", "-1"}})).rank.has_value());
  CHECK_FALSE(hangwatch::detectRankIdentity(envOf({})).rank.has_value());
}

TEST_CASE("AtomicWriteCreatesParentsAndReplacesWholeFiles") {
  std::string dir = tempDir();
  std::string path = dir + "/ranks/r00001.watchdog.json";
  REQUIRE(hangwatch::writeFileAtomically(path, "{\"a\":1}").ok());
  CHECK(slurp(path) == "{\"a\":1}");
  REQUIRE(hangwatch::writeFileAtomically(path, "{\"a\":2}").ok());
  CHECK(slurp(path) == "{\"a\":2}");
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir + "/ranks")) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST_CASE("ExclusiveCreateHasExactlyOneWinner") {
  std::string dir = tempDir();
  std::string path = dir + "/TRIGGER.json";
  auto first = hangwatch::createFileExclusively(path, "first");
  auto second = hangwatch::createFileExclusively(path, "second");
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(*first);
  CHECK_FALSE(*second);
  CHECK(slurp(path) == "first");
  std::filesystem::remove_all(dir);
}

TEST_CASE("AtomicWriteReportsUnwritableDirectory") {
  auto r = hangwatch::writeFileAtomically("/proc/hangwatch-cannot-write/x.json", "x");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("/proc/hangwatch-cannot-write"));
}
