#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/slowdown/chrome_trace.h"
#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/common/timeline_window.h"
#include "test_env.h"

using namespace hangwatch;
using namespace hangwatch::slowdown;

using test_support::TempDir;

namespace {

void writeText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

MetricsWindow window(int rank, int64_t m0) {
  MetricsWindow w;
  w.rank = rank;
  w.host = "h";
  w.start_mono_ns = m0;
  w.end_mono_ns = m0 + 1'000'000'000;
  OpWindowStats g;
  g.cls = "gemm";
  g.name = "cublasGemmEx";
  g.shape = "64x64x64";
  g.count = 10;
  g.total_ns = 10'000'000;
  g.tflops = 0.05;
  w.ops.push_back(g);
  OpWindowStats c;
  c.cls = "coll";
  c.name = "ncclAllReduce";
  c.comm = "0xabc";
  c.comm_size = 4;
  c.comm_rank = rank;
  c.bytes = 1024;
  c.count = 5;
  c.total_ns = 5'000'000;
  w.ops.push_back(c);
  w.busy_ns = 800'000'000;
  w.void_ns = 200'000'000;
  return w;
}

TimelineWindow timeline(int rank) {
  TimelineWindow w;
  w.rank = rank;
  w.host = "h";
  w.pid = 100 + rank;
  w.clock_mono_ns = 5'000'000'000;
  w.clock_unix_s = 1'700'000'000.0;
  w.overwritten = 7;
  for (uint64_t seq = 0; seq < 3; ++seq) {
    int64_t t = 1'000'000'000 + static_cast<int64_t>(seq) * 100'000'000;
    w.ops.push_back({"gemm", "cublasGemmEx", "0x10", "", -1, 0, -1, 0, 0, 2.0 * 64 * 64 * 64, "64x64x64", t, t + 1000, t + 5'000'000});
    w.ops.push_back({"coll", "ncclAllReduce", "0x10", "0xabc", rank, 4, -1, seq, 1024, 0, "", t + 2000, t + 6'000'000 + rank * 1000,
                     t + 9'000'000});
  }
  w.syncs.push_back({"cudaStreamSynchronize", 1'000'100'000, 1'000'200'000});
  return w;
}

}  // namespace

TEST_CASE("TimelineWindowRoundTripsThroughJson") {
  TimelineWindow w = timeline(2);
  Expected<TimelineWindow> back = timelineWindowFromJson(nlohmann::json::parse(toJson(w).dump()));
  REQUIRE(back.ok());
  CHECK(back->rank == 2);
  CHECK_FALSE(back->device);
  CHECK(back->overwritten == 7);
  REQUIRE(back->ops.size() == w.ops.size());
  for (size_t i = 0; i < w.ops.size(); ++i) {
    CHECK(back->ops[i].name == w.ops[i].name);
    CHECK(back->ops[i].comm == w.ops[i].comm);
    CHECK(back->ops[i].seq == w.ops[i].seq);
    CHECK(back->ops[i].shape == w.ops[i].shape);
    CHECK(back->ops[i].issue_ns == w.ops[i].issue_ns);
    CHECK(back->ops[i].start_ns == w.ops[i].start_ns);
    CHECK(back->ops[i].end_ns == w.ops[i].end_ns);
  }
  REQUIRE(back->syncs.size() == 1);
  CHECK(back->syncs[0].end_ns == 1'000'200'000);
  w.device = 3;
  back = timelineWindowFromJson(nlohmann::json::parse(toJson(w).dump()));
  REQUIRE(back.ok());
  CHECK(back->device == 3);
}

TEST_CASE("TimelineWithAnOutOfRangeTableIndexIsAnErrorNotACrash") {
  nlohmann::json j = toJson(timeline(0));
  j["ops"][0][1] = 99;
  CHECK_FALSE(timelineWindowFromJson(j).ok());
  j["ops"][0] = "garbage";
  CHECK_FALSE(timelineWindowFromJson(j).ok());
}

TEST_CASE("JobWithCorruptAndMissingRankFilesIsAnalysedFromTheRest") {
  TempDir dir;
  for (int r : {0, 1, 3}) {
    std::string lines;
    for (int i = 0; i < 3; ++i) lines += toJson(window(r, i * 1'000'000'000LL)).dump() + "\n";
    if (r == 1) lines += "{\"rank\": 1, \"ops\": [trunc\n";
    writeText(metricsPath(dir.path, r), lines);
  }
  writeText(metricsPath(dir.path, 2), "not json at all\n");
  writeText(timelinePath(dir.path, 0), toJson(timeline(0)).dump());
  writeText(timelinePath(dir.path, 1), "{\"v\":1,\"ops\":[[");
  Expected<JobProfile> job = JobProfile::load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->ranks().size() == 3);
  CHECK(job->ranksMissing() == std::vector<int>{2});
  CHECK(job->ranks().at(0).has_timeline);
  CHECK_FALSE(job->ranks().at(1).has_timeline);
  CHECK(job->ranks().at(1).bad_lines == 1);
  // The first of three windows holds start-up work and is left out.
  CHECK(job->ranks().at(0).windows == 2);
  CHECK(job->ranks().at(0).gemms.at("64x64x64").tflops() == Approx(0.05));
  CHECK(job->problems().size() >= 3);
}

// A window whose collective came in without the rank's place in the communicator (an op
// enqueued before NCCL answered ncclCommUserRank) does not erase what other windows said:
// the communicator keeps every member, so a baseline with all of them still compares.
TEST_CASE("ACollectiveWithoutItsCommRankInOneWindowKeepsTheRankAMember") {
  TempDir dir;
  for (int r : {0, 1, 2, 3}) {
    std::string lines;
    for (int i = 0; i < 3; ++i) {
      MetricsWindow w = window(r, i * 1'000'000'000LL);
      if (i == 2 && r != 3) w.ops[1].comm_rank.reset();
      lines += toJson(w).dump() + "\n";
    }
    writeText(metricsPath(dir.path, r), lines);
  }
  Expected<JobProfile> job = JobProfile::load(dir.path);
  REQUIRE(job.ok());
  REQUIRE(job->communicators().count("0xabc") == 1);
  CHECK(job->communicators().at("0xabc").members() == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("JobWithoutMetricsIsAnError") {
  TempDir dir;
  CHECK_FALSE(JobProfile::load(dir.path).ok());
  CHECK_FALSE(JobProfile::load(dir.path + "/nonexistent").ok());
  writeText(metricsPath(dir.path, 0), "garbage\n");
  CHECK_FALSE(JobProfile::load(dir.path).ok());
}

TEST_CASE("ChromeTraceFollowsTheTraceEventSchema") {
  ChromeTrace trace;
  for (int r = 0; r < 4; ++r) trace.addRank(timeline(r));
  nlohmann::json t = nlohmann::json::parse(trace.build().dump());
  REQUIRE(t["traceEvents"].is_array());
  int slices = 0, flows_start = 0, flows_end = 0, issues = 0;
  for (const auto& e : t["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("pid"));
    REQUIRE(e["pid"].is_number_integer());
    std::string ph = e["ph"];
    REQUIRE(e.contains("name"));
    if (ph == "M") continue;
    REQUIRE(e["ts"].is_number());
    CHECK(e["ts"].get<double>() >= 0);
    REQUIRE(e["tid"].is_number_integer());
    if (ph == "X") {
      REQUIRE(e["dur"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      ++slices;
    } else if (ph == "s") {
      ++flows_start;
    } else if (ph == "f") {
      CHECK(e["bp"] == "e");
      ++flows_end;
    } else if (ph == "i") {
      ++issues;
    } else {
      CHECK(ph == "t");
    }
  }
  CHECK(slices == 4 * (6 + 1));  // 6 ops and 1 sync per rank
  CHECK(issues == 4 * 6);
  CHECK(flows_start == 3);  // one arrow per collective sequence number across the 4 ranks
  CHECK(flows_end == 3);
}

TEST_CASE("ChromeTraceLastSecondsDropsOlderOps") {
  ChromeTrace trace(0.15);  // the three ops per rank are 100 ms apart
  trace.addRank(timeline(0));
  const nlohmann::json built = trace.build();
  int slices = 0;
  for (const auto& e : built["traceEvents"])
    if (e["ph"] == "X" && e["cat"] != "sync") ++slices;
  CHECK(slices == 4);  // the last two GEMM + AllReduce pairs
}
