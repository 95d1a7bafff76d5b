#include <catch2/catch.hpp>

#include "hangwatch/verdict/html_report_writer.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/json_report_writer.h"
#include "hangwatch/verdict/report_builder.h"
#include "hangwatch/verdict/text_report_writer.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;

namespace {

Report deadLinkReport(const std::string& dir, int missing_rank = -1) {
  auto ranks = verdict_test::ringJob(
      4, 10, 2, [](int f, int) -> std::optional<uint64_t> { return f == 1 ? 5 : 9; },
      [](int f, int) -> std::optional<uint64_t> { return f == 1 ? 5 : 8; });
  for (const auto& r : ranks) {
    if (*r.snap.identity.rank != missing_rank) r.write(dir);
  }
  verdict_test::writeTrigger(dir, 2, 10);
  Expected<JobData> job = JobLoader().load(dir);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job));
}

}  // namespace

TEST_CASE("JsonCarriesTheContractFields") {
  verdict_test::TempDir dir;
  nlohmann::json j = JsonReportWriter::toJson(deadLinkReport(dir.path, 3));
  const nlohmann::json& v = j.at("verdict");
  CHECK(v.at("kind") == "communication-hang");
  CHECK(v.at("culprit_ranks") == nlohmann::json::array({1, 2}));
  CHECK(v.at("culprit_link") == nlohmann::json({{"from", 1}, {"to", 2}}));
  CHECK(v.at("communicator") == verdict_test::kComm);
  CHECK(v.at("op").at("name") == "ncclAllReduce");
  CHECK(v.at("op").at("seq") == 10);
  CHECK(v.at("evidence").is_array());
  CHECK_FALSE(v.at("evidence").empty());
  CHECK(j.at("ranks_missing") == nlohmann::json::array({3}));
  REQUIRE(j.at("stack_classes").is_array());
  REQUIRE_FALSE(j.at("stack_classes").empty());
  CHECK(j.at("stack_classes")[0].at("ranks").is_array());
  CHECK(j.at("stack_classes")[0].at("threads")[0].at("frames").is_array());
}

TEST_CASE("JsonOfANoHangHasNullLinkAndOp") {
  verdict_test::TempDir dir;
  (void)writeFileAtomically(metricsPath(dir.path, 0), "{}\n");
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  nlohmann::json j = JsonReportWriter::toJson(ReportBuilder::build(std::move(*job)));
  CHECK(j.at("verdict").at("kind") == "no-hang");
  CHECK(j.at("verdict").at("culprit_link").is_null());
  CHECK(j.at("verdict").at("op").is_null());
  CHECK(j.at("verdict").at("culprit_ranks").empty());
}

TEST_CASE("TextPutsTheVerdictFirstAndShowsTheGrid") {
  verdict_test::TempDir dir;
  std::string text = TextReportWriter::write(deadLinkReport(dir.path, 3));
  CHECK(text.rfind("VERDICT: COMMUNICATION HANG\n", 0) == 0);
  CHECK(text.find("culprit link: rank 1 -> rank 2") != std::string::npos);
  CHECK(text.find("ranks missing (no usable dump): 3") != std::string::npos);
  // Ranks 1 and 2 are culprits (*), 3 has no stacks (.).
  CHECK(text.find("     0  A**.\n") != std::string::npos);
}

TEST_CASE("HtmlIsSelfContainedAndMarksOnlyTheCulpritLinkInTheCulpritColour") {
  verdict_test::TempDir dir;
  std::string html = HtmlReportWriter::write(deadLinkReport(dir.path));
  CHECK(html.find("<svg id=\"ring\"") != std::string::npos);
  CHECK(html.find("<svg id=\"grid\"") != std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<title>1 -&gt; 2: culprit link</title>") != std::string::npos);
  size_t red_lines = 0;
  for (size_t p = html.find("<line"); p != std::string::npos; p = html.find("<line", p + 1)) {
    size_t end = html.find('>', p);
    if (html.substr(p, end - p).find(HtmlReportWriter::kCulpritColour) != std::string::npos) ++red_lines;
  }
  CHECK(red_lines == 1);
}

TEST_CASE("ClassColoursNeverUseTheCulpritColour") {
  for (int i = 0; i < 200; ++i) CHECK(HtmlReportWriter::classColour(i) != HtmlReportWriter::kCulpritColour);
}

TEST_CASE("HtmlEscapesTextFromTheDumps") {
  verdict_test::TempDir dir;
  verdict_test::FakeRank r(0, 1, 1);
  r.snap.identity.host = "<script>alert(1)</script>";
  r.write(dir.path);
  Expected<JobData> job = JobLoader().load(dir.path);
  REQUIRE(job.ok());
  std::string html = HtmlReportWriter::write(ReportBuilder::build(std::move(*job)));
  CHECK(html.find("<script>") == std::string::npos);
  CHECK(html.find("&lt;script&gt;") != std::string::npos);
}
