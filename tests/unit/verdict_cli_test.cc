#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "report_command.h"
#include "verdict_test_fixture.h"

using hangwatch::forensics::ReportCommand;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("ReportUsageErrorsExitTwo") {
  ReportCommand c;
  CHECK(c.run({}) == 2);
  CHECK(c.run({"/tmp", "--format", "pdf"}) == 2);
  CHECK(c.run({"/tmp", "--bogus"}) == 2);
  CHECK(c.run({"/tmp", "/var"}) == 2);
  CHECK(c.run({"/tmp", "--threads", "0"}) == 2);
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
