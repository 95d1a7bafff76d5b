// Node summaries (nodes/<host>.json) stand for their ranks' files: the report made from them
// is, byte for byte, the report made from the rank files, whatever is missing or damaged,
// with a node's summary present, missing, damaged or lacking some of its ranks.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/verdict/html_report_writer.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/json_report_writer.h"
#include "hangwatch/verdict/node_summaries.h"
#include "hangwatch/verdict/report_builder.h"
#include "hangwatch/verdict/text_report_writer.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;
namespace fs = std::filesystem;

namespace {

struct Rendered {
  std::string json, text, html;
  int summaries_used = 0;
  std::vector<std::string> notes;
};

Rendered render(const std::string& dir, bool summaries) {
  LoadOptions o;
  o.node_summaries = summaries;
  Expected<JobData> job = JobLoader(2, o).load(dir);
  REQUIRE(job.ok());
  Rendered r;
  r.summaries_used = job->node_summaries_used;
  r.notes = job->read_notes;
  Report report = ReportBuilder::build(std::move(*job));
  r.json = JsonReportWriter::toJson(report).dump(1);
  r.text = TextReportWriter::write(report);
  r.html = HtmlReportWriter::write(report);
  return r;
}

void requireSameReport(const std::string& dir, int expect_summaries) {
  Rendered flat = render(dir, false);
  Rendered merged = render(dir, true);
  CHECK(merged.summaries_used == expect_summaries);
  CHECK(merged.json == flat.json);
  CHECK(merged.text == flat.text);
  CHECK(merged.html == flat.html);
}

void writeState(const std::string& dir, int rank, const std::string& host, DumpPhase phase) {
  RankState s;
  s.rank = rank;
  s.phase = phase;
  s.pid = 100 + rank;
  s.host = host;
  s.time_unix_s = 1001;
  s.deadline_unix_s = phase == DumpPhase::kDone ? 1090 : 4e9;  // collecting: far from its deadline
  s.collector_pid = phase == DumpPhase::kDone ? 0 : 999999;
  s.snapshot = "written";
  s.forensics = phase == DumpPhase::kDone ? "written" : "pending";
  REQUIRE(writeFileAtomically(rankStatePath(dir, rank), toJson(s).dump()).ok());
}

NodeSummary summarize(const std::string& dir, const std::string& host, const std::vector<int>& ranks) {
  NodeSummary s = NodeSummaryBuilder::build(dir, host, ranks, 1002);
  REQUIRE(NodeSummaryBuilder::write(dir, s).ok());
  return s;
}

// Eight ranks on two nodes of four, the link 5 -> 6 dead: 5's sends stopped, 6 waits for it.
std::vector<FakeRank> deadLinkJob() {
  return verdict_test::ringJob(
      8, 10, 2, [](int from, int) -> std::optional<uint64_t> { return from == 5 ? 3 : 9; },
      [](int from, int) -> std::optional<uint64_t> { return from == 5 ? 3 : 9; });
}

}  // namespace

TEST_CASE("NodeSummariesGiveTheFlatReport") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadLinkJob()) {
    r.write(dir.path);
    writeState(dir.path, *r.snap.identity.rank, r.snap.identity.host, DumpPhase::kDone);
  }
  verdict_test::writeTrigger(dir.path, 6, 10);
  NodeSummary n0 = summarize(dir.path, "node0", {0, 1, 2, 3});
  summarize(dir.path, "node1", {4, 5, 6, 7});
  CHECK(n0.covers == std::vector<int>{0, 1, 2, 3});
  CHECK(n0.lacks.empty());
  requireSameReport(dir.path, 2);
  Rendered merged = render(dir.path, true);
  CHECK(merged.notes.empty());
  CHECK_THAT(merged.json, Catch::Contains("\"from\": 5"));

  SECTION("one node's summary missing: its ranks come from their files") {
    fs::remove(nodeSummaryPath(dir.path, "node1"));
    requireSameReport(dir.path, 1);
  }
  SECTION("one node's summary damaged: not used, said on stderr") {
    const std::string path = nodeSummaryPath(dir.path, "node1");
    const auto size = fs::file_size(path);
    fs::resize_file(path, size / 2);
    requireSameReport(dir.path, 1);
    REQUIRE(render(dir.path, true).notes.size() == 1);
    CHECK_THAT(render(dir.path, true).notes[0], Catch::Contains("node1.json not used"));
  }
  SECTION("a stack class whose frames do not match its key: the summary is not used") {
    const std::string path = nodeSummaryPath(dir.path, "node0");
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("simnccl_wait_peer");
    REQUIRE(at != std::string::npos);
    text.replace(at, 7, "SIMNCCL");
    REQUIRE(writeFileAtomically(path, text).ok());
    // node1's summary has the same stacks: whichever is read first teaches the class.
    fs::remove(nodeSummaryPath(dir.path, "node1"));
    requireSameReport(dir.path, 0);
    CHECK_THAT(render(dir.path, true).notes.at(0), Catch::Contains("do not match its key"));
  }
  SECTION("a collection by hand without a rank is counted once, as in the flat report") {
    REQUIRE(writeFileAtomically(dir.path + "/ranks/p4242.forensics.json", "{}").ok());
    requireSameReport(dir.path, 2);
    CHECK_THAT(render(dir.path, true).json,
               Catch::Contains("1 collection(s) by hand without a rank (ranks/p<PID>.forensics.json) are not used"));
  }
  SECTION("a rank in two summaries is read from its own files") {
    NodeSummary extra = summarize(dir.path, "node9", {5});
    CHECK(extra.covers == std::vector<int>{5});
    requireSameReport(dir.path, 3);
    CHECK_THAT(render(dir.path, true).notes.at(0), Catch::Contains("more than one node summary"));
  }
  SECTION("a rank collected again by hand after its summary: its new dump is read") {
    FakeRank again = deadLinkJob()[5];
    again.dump.threads.push_back(verdict_test::thread(999, "late", {"nanosleep", "main"}));
    again.write(dir.path);  // replaces the files, as every writer of dumps does
    requireSameReport(dir.path, 2);
    CHECK_THAT(render(dir.path, true).notes.at(0), Catch::Contains("1 rank(s) have files other than"));
  }
  SECTION("a summary covering a rank whose files are gone: the rank is missing, as in the flat report") {
    for (const char* ext : {"watchdog", "forensics", "state"}) fs::remove(dir.path + "/ranks/r00002." + ext + ".json");
    requireSameReport(dir.path, 2);
    CHECK_THAT(render(dir.path, true).json, Catch::Contains("\"ranks_missing\": [\n  2\n ]"));
  }
}

TEST_CASE("NodeSummaryLacksRanksNotDoneAndTheReportReadsTheirFiles") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks = deadLinkJob();
  for (FakeRank& r : ranks) {
    const int n = *r.snap.identity.rank;
    if (n == 6) r.dump.threads.clear();  // what a collector cut short leaves
    r.write(dir.path);
    // Rank 2's collector still runs on another host; rank 7 has no state file at all; rank 4
    // was found gone by rank 5 (its files are from before: a rank that died mid-dump).
    if (n == 2) writeState(dir.path, n, "elsewhere", DumpPhase::kCollecting);
    else if (n != 7) writeState(dir.path, n, r.snap.identity.host, DumpPhase::kDone);
  }
  // Rank 3's forensics dump is truncated: the summary keeps the problem as the report words it.
  {
    const std::string path = forensicsDumpPath(dir.path, 3);
    fs::resize_file(path, fs::file_size(path) / 3);
  }
  verdict_test::writeTrigger(dir.path, 6, 10);
  NodeSummary n0 = summarize(dir.path, "node0", {0, 1, 2, 3});
  NodeSummary n1 = summarize(dir.path, "node1", {4, 5, 6, 7});
  CHECK(n0.covers == std::vector<int>{0, 1, 3});
  CHECK(n0.lacks == std::vector<int>{2});
  CHECK(n1.lacks == std::vector<int>{7});
  CHECK_FALSE(n0.ranks.at(2).forensics_problem.empty());
  requireSameReport(dir.path, 2);
  CHECK_THAT(render(dir.path, true).json, Catch::Contains("\"ranks_collecting\": [\n  2\n ]"));
}

TEST_CASE("NodeSummaryStoresEachStackOnceAsAPrefixTree") {
  verdict_test::TempDir dir;
  std::vector<FakeRank> ranks = deadLinkJob();
  for (FakeRank& r : ranks) {
    if (*r.snap.identity.rank == 1)
      r.dump.threads.push_back(verdict_test::thread(301, "loader", {"poll", "worker_loop", "main"}));
    r.write(dir.path);
    writeState(dir.path, *r.snap.identity.rank, r.snap.identity.host, DumpPhase::kDone);
  }
  NodeSummary s = summarize(dir.path, "node0", {0, 1, 2, 3});
  // Three distinct stacks: the main thread's, the channel thread's, rank 1's loader.
  REQUIRE(s.classes.size() == 3);
  std::multimap<std::string, const NodeStackClass*> by_ranks;
  for (const NodeStackClass& c : s.classes) by_ranks.emplace(c.ranks + "/" + std::to_string(c.threads), &c);
  CHECK(by_ranks.count("0-3/4") == 2);
  REQUIRE(by_ranks.count("1/1") == 1);
  // "main" is the outermost frame of the main and loader stacks: stored once, as a root.
  int mains = 0;
  for (const StackTreeNode& n : s.tree)
    if (n.label.find("main") == 0) {
      ++mains;
      CHECK(n.parent == -1);
    }
  CHECK(mains == 1);
  CHECK(s.tree.size() == 4 + 2 + 2);  // main + 3 above it, the channel's 2, the loader's 2 above main
  // The frames of a class, innermost first, as the report's stack table has them.
  const NodeStackClass* loader = by_ranks.find("1/1")->second;
  std::vector<std::string> labels;
  for (int at = loader->leaf; at >= 0; at = s.tree[at].parent) labels.push_back(s.tree[at].label);
  REQUIRE(labels.size() == 3);
  CHECK(labels[0].find("poll") == 0);
  CHECK(labels[2].find("main") == 0);
}

TEST_CASE("NodeSummariesGiveTheFlatReportOnTheRealDumpFixtures") {
  for (const char* fixture : {"cuda-dead-link", "cuda-dead-link-gdb-only", "cuda-dead-link-nccl-id-only"}) {
    INFO(fixture);
    verdict_test::TempDir dir;
    fs::copy(std::string(HANGWATCH_FIXTURES_DIR) + "/" + fixture, dir.path, fs::copy_options::recursive);
    // Grouped by the host each rank's state names, as `forensics node-summary --all` does.
    std::map<std::string, std::vector<int>> hosts;
    for (int r = 0;; ++r) {
      Expected<RankState> s = readRankState(rankStatePath(dir.path, r));
      if (!s) break;
      if (!s->done()) writeState(dir.path, r, s->host, DumpPhase::kDone);
      hosts[s->host].push_back(r);
    }
    REQUIRE_FALSE(hosts.empty());
    for (const auto& [host, ranks] : hosts) summarize(dir.path, host, ranks);
    requireSameReport(dir.path, static_cast<int>(hosts.size()));
  }
}
