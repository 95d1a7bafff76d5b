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

// A dead link 1->2 on 6 ranks where 3 and 4 left nothing: 3 -> 4 is seen by neither end.
Report unsureReport(const std::string& dir) {
  auto ranks = verdict_test::ringJob(
      6, 10, 2, [](int f, int) -> std::optional<uint64_t> { return 100 + (f - 1 + 6) % 6; },
      [](int f, int) -> std::optional<uint64_t> { return 100 + (f - 1 + 6) % 6; });
  for (const auto& r : ranks) {
    int n = *r.snap.identity.rank;
    if (n != 3 && n != 4) r.write(dir);
  }
  verdict_test::writeTrigger(dir, 0, 10);
  Expected<JobData> job = JobLoader().load(dir);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job));
}

}  // namespace

TEST_CASE("JsonSaysWhatAnUnsureVerdictHingesOnAndWhoIsStillSuspect") {
  verdict_test::TempDir dir;
  nlohmann::json j = JsonReportWriter::toJson(unsureReport(dir.path));
  const nlohmann::json& v = j.at("verdict");
  CHECK(v.at("kind") == "inconclusive");
  CHECK(v.at("confident") == false);
  CHECK(v.at("culprit_link").is_null());
  CHECK(v.at("culprit_ranks").empty());
  CHECK(v.at("hinges_on").get<std::string>().find("ranks 3 and 4") != std::string::npos);
  REQUIRE(v.at("suspects").size() == 2);
  CHECK(v.at("suspects")[0].at("link") == nlohmann::json({{"from", 1}, {"to", 2}}));
  CHECK(v.at("suspects")[1].at("link") == nlohmann::json({{"from", 3}, {"to", 4}}));
  CHECK(v.at("suspects")[1].at("ranks") == nlohmann::json::array({3, 4}));
  CHECK(v.at("lacking_data") == nlohmann::json::parse(R"([{"rank": 3, "lacks": "no dump"}, {"rank": 4, "lacks": "no dump"}])"));
  CHECK(j.at("ranks_collecting").is_array());
  nlohmann::json sure = JsonReportWriter::toJson(deadLinkReport(dir.path + "/sure"));
  CHECK(sure.at("verdict").at("confident") == true);
  CHECK(sure.at("verdict").at("hinges_on").is_null());
  CHECK(sure.at("verdict").at("suspects").empty());
}

TEST_CASE("TextShowsWhatTheVerdictHingesOnRightUnderIt") {
  verdict_test::TempDir dir;
  std::string text = TextReportWriter::write(unsureReport(dir.path));
  size_t verdict = text.find("VERDICT: INCONCLUSIVE");
  size_t gap = text.find("NOT CONFIDENT: the verdict hinges on ring progress of ranks 3 and 4");
  size_t next = text.find("What to do next");
  CHECK(verdict == 0);
  REQUIRE(gap != std::string::npos);
  CHECK(gap < next);
  // Each suspect is followed by the nodes it sits on, when the dumps name them.
  const size_t suspects = text.find("suspects: link 1 -> 2");
  REQUIRE(suspects != std::string::npos);
  CHECK(text.find("; link 3 -> 4", suspects) < text.find('\n', suspects));
  CHECK(text.find("rank 3 lacks data: no dump") != std::string::npos);
}

TEST_CASE("HtmlShowsTheDataGapBesideTheVerdictAndSuspectsInAmberNotRed") {
  verdict_test::TempDir dir;
  std::string html = HtmlReportWriter::write(unsureReport(dir.path));
  size_t verdict = html.find("<div class=\"verdict\">");
  size_t gap = html.find("<div class=\"gap\" id=\"data-gap\">Not confident");
  REQUIRE(gap != std::string::npos);
  CHECK(verdict < gap);
  CHECK(gap < html.find("<svg id=\"ring\""));
  CHECK(html.find("<title>3 -&gt; 4: suspect</title>") != std::string::npos);
  // No culprit was named, so nothing drawn is red (only the unused arrow-head definition is).
  for (const char* element : {"<line", "<path class", "<circle", "<rect"}) {
    for (size_t p = html.find(element); p != std::string::npos; p = html.find(element, p + 1)) {
      size_t end = html.find('>', p);
      CHECK(html.substr(p, end - p).find(HtmlReportWriter::kCulpritColour) == std::string::npos);
    }
  }
}

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
  // Ring links are drawn as paths (a network link bows outward); exactly one is red.
  size_t red_links = 0, links = 0;
  for (size_t p = html.find("<path class=\""); p != std::string::npos; p = html.find("<path class=\"", p + 1)) {
    size_t end = html.find('>', p);
    ++links;
    if (html.substr(p, end - p).find(HtmlReportWriter::kCulpritColour) != std::string::npos) ++red_links;
  }
  CHECK(links == 4);
  CHECK(red_links == 1);
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
