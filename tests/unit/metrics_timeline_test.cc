#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "hangwatch/common/timeline_window.h"
#include "hangwatch/watchdog/metrics/metrics_windows.h"
#include "hangwatch/watchdog/metrics/timeline_ring.h"
#include "test_env.h"

using hangwatch::readTimelineFile;
using hangwatch::watchdog::CompletedOp;
using hangwatch::watchdog::HostSync;
using hangwatch::watchdog::MetricsConfig;
using hangwatch::watchdog::MetricsWindows;
using hangwatch::watchdog::OpClass;
using hangwatch::watchdog::TimelineRing;

using test_support::kMs;

namespace {

constexpr int64_t kTimelineStart = 1'000'000'000'000;

CompletedOp allReduce(uint64_t seq, int64_t start) {
  CompletedOp o;
  o.cls = OpClass::kCollective;
  o.name = "ncclAllReduce";
  o.stream = 0x10;
  o.comm_hash = 0xabc;
  o.comm_size = 4;
  o.comm_rank = 1;
  o.seq = seq;
  o.bytes = 4096;
  o.host_issue_ns = start - 50000;
  o.gpu_start_ns = start;
  o.gpu_end_ns = start + kMs;
  return o;
}

}  // namespace

TEST_CASE("TimelineRingKeepsTheLastOpsOldestFirst") {
  TimelineRing ring(4, 2);
  for (uint64_t s = 0; s < 10; ++s) ring.record(allReduce(s, kTimelineStart + static_cast<int64_t>(s) * 10 * kMs));
  CHECK(ring.size() == 4);
  CHECK(ring.overwritten() == 6);
  hangwatch::TimelineWindow w = ring.snapshot();
  REQUIRE(w.ops.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(w.ops[i].seq == 6 + i);
  CHECK(w.ops[0].comm == "0xabc");
  CHECK(w.ops[0].comm_rank == 1);
  CHECK(w.overwritten == 6);
}

TEST_CASE("TimelineRingNamesGemmShapesAsTheMetricsDo") {
  TimelineRing ring(4, 1);
  CompletedOp g;
  g.cls = OpClass::kGemm;
  g.name = "cublasGemmEx";
  g.m = 256, g.n = 32, g.k = 128, g.batch = 4;
  g.gpu_start_ns = kTimelineStart;
  g.gpu_end_ns = kTimelineStart + kMs;
  ring.record(g);
  CHECK(ring.snapshot().ops.at(0).shape == "256x32x128x4");
}

TEST_CASE("MetricsFlushRewritesTheTimelineFile") {
  char tmpl[] = "/tmp/metrics_timeline_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  MetricsConfig c;
  c.rank = 1;
  c.path = dir + "/metrics/r00001.jsonl";
  c.timeline_path = dir + "/timeline/r00001.json";
  c.timeline_ops = 8;
  c.interval_s = 1;
  c.host = "testhost";
  c.start_ns = kTimelineStart;
  {
    MetricsWindows m(c);
    for (uint64_t s = 0; s < 20; ++s) m.record(allReduce(s, kTimelineStart + static_cast<int64_t>(s) * 10 * kMs));
    m.recordHostSync(HostSync{"cudaStreamSynchronize", kTimelineStart + kMs, kTimelineStart + 2 * kMs});
    m.flush(kTimelineStart + 500 * kMs);
    auto first = readTimelineFile(c.timeline_path);
    REQUIRE(first.ok());
    CHECK(first->rank == 1);
    CHECK(first->host == "testhost");
    REQUIRE(first->ops.size() == 8);
    CHECK(first->ops.back().seq == 19);
    CHECK(first->ops.back().issue_ns == kTimelineStart + 190 * kMs - 50000);
    CHECK(first->syncs.size() == 1);
    m.record(allReduce(20, kTimelineStart + 600 * kMs));
    m.flush(kTimelineStart + 1000 * kMs);
    auto second = readTimelineFile(c.timeline_path);
    REQUIRE(second.ok());
    CHECK(second->ops.back().seq == 20);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("NoTimelinePathWritesNoTimeline") {
  char tmpl[] = "/tmp/metrics_timeline_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  MetricsConfig c;
  c.path = dir + "/metrics/r00000.jsonl";
  c.start_ns = kTimelineStart;
  {
    MetricsWindows m(c);
    m.record(allReduce(0, kTimelineStart + kMs));
    m.flush(kTimelineStart + 500 * kMs);
  }
  CHECK_FALSE(std::filesystem::exists(dir + "/timeline"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("TimelineNumbersNoIntegerHoldsAreErrorsNotCasts") {
  auto parse = [](const char* text) { return hangwatch::timelineWindowFromJson(nlohmann::json::parse(text)); };
  const char* good = R"({"base": 1000, "names": ["k"], "streams": ["0x1"], "comms": [],
                         "ops": [["kernel", 0, 0, -1, 0, 0, 0, 1, 0, 0.0, 5, 10, 20]], "syncs": [[0, 1, 2]]})";
  auto ok = parse(good);
  REQUIRE(ok.ok());
  CHECK(ok->ops[0].start_ns == 1010);
  CHECK(ok->ops[0].issue_ns == 1005);
  CHECK(ok->syncs[0].end_ns == 1002);
  // A float no integer holds, a time offset that overflows the base, an index out of range.
  CHECK_FALSE(parse(R"({"names": ["k"], "streams": ["s"], "ops": [["kernel", 0, 0, -1, 0, 0, 0, 1e300, 0, 0.0, 5, 10, 20]]})").ok());
  CHECK_FALSE(parse(R"({"base": 9223372036854775000, "names": ["k"], "syncs": [[0, 1000, 2000]]})").ok());
  CHECK_FALSE(parse(R"({"names": ["k"], "syncs": [[5e20, 1, 2]]})").ok());
}

TEST_CASE("TheTimelineFileKeepsItsLayout") {
  // What the hand-written writer produced before the timeline got a field list: ops are
  // rows indexing the name, stream and communicator tables, times offsets from "base".
  hangwatch::TimelineWindow t;
  t.rank = 2;
  t.host = "h";
  t.pid = 9;
  t.clock_mono_ns = 5000;
  t.clock_unix_s = 17.25;
  t.overwritten = 3;
  hangwatch::TimelineOp coll;
  coll.cls = "coll";
  coll.name = "ncclAllReduce";
  coll.stream = "0x1";
  coll.comm = "0xc";
  coll.comm_rank = 1;
  coll.comm_size = 2;
  coll.seq = 4;
  coll.bytes = 64;
  coll.issue_ns = 4000;
  coll.start_ns = 4500;
  coll.end_ns = 6000;
  hangwatch::TimelineOp gemm = coll;
  gemm.cls = "gemm";
  gemm.name = "cublasGemmEx";
  gemm.comm = "";
  gemm.shape = "1x2x3";
  gemm.issue_ns = 0;
  gemm.flops = 12.5;
  t.ops = {coll, gemm};
  t.syncs = {{"cudaStreamSynchronize", 3000, 3500}};
  const std::string line = hangwatch::toJson(t).dump();
  CHECK(line == R"({"base":3000,"cm":5000,"comms":["0xc"],"cu":17.25,"host":"h","lost":3,"names":["ncclAllReduce","cublasGemmEx","1x2x3","cudaStreamSynchronize"],"ops":[["coll",0,0,0,1,2,-1,4,64,0.0,1000,1500,3000,-1],["gemm",1,0,-1,1,2,-1,4,64,12.5,-1,1500,3000,2]],"pid":9,"rank":2,"streams":["0x1"],"syncs":[[3,0,500]],"v":1})");
  auto back = hangwatch::timelineWindowFromJson(nlohmann::json::parse(line));
  REQUIRE(back.ok());
  CHECK(hangwatch::toJson(*back).dump() == line);
  CHECK(back->ops[1].shape == "1x2x3");
  CHECK(back->ops[1].issue_ns == 0);
  CHECK(back->ops[0].issue_ns == 4000);
  CHECK(back->syncs[0].start_ns == 3000);
  CHECK(back->overwritten == 3);
}
