#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hangwatch/common/metrics_window.h"
#include "hangwatch/watchdog/metrics/metrics_windows.h"
#include "test_env.h"

using hangwatch::watchdog::CompletedOp;
using hangwatch::watchdog::HostSync;
using hangwatch::watchdog::MetricsConfig;
using hangwatch::watchdog::MetricsWindows;
using hangwatch::watchdog::OpClass;

using test_support::TempDir;

using test_support::kMs;

namespace {

constexpr int64_t kStart = 1'000'000'000'000;  // an arbitrary CLOCK_MONOTONIC origin

MetricsConfig configIn(const TempDir& dir, double interval_s = 1.0) {
  MetricsConfig c;
  c.rank = 2;
  c.path = dir.path + "/metrics/r00002.jsonl";
  c.interval_s = interval_s;
  c.host = "testhost";
  c.start_ns = kStart;
  return c;
}

std::vector<std::string> linesOf(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

CompletedOp op(OpClass cls, const char* name, int64_t start, int64_t end, uint64_t stream = 1) {
  CompletedOp o;
  o.cls = cls;
  o.name = name;
  o.stream = stream;
  o.host_issue_ns = start - 10000;
  o.gpu_start_ns = start;
  o.gpu_end_ns = end;
  return o;
}

CompletedOp collective(const char* name, uint64_t bytes, int comm_size, int64_t start, int64_t end) {
  CompletedOp o = op(OpClass::kCollective, name, start, end);
  o.comm_hash = 0xc0ffee + static_cast<uint64_t>(comm_size);
  o.comm_size = comm_size;
  o.comm_rank = 1;
  o.bytes = bytes;
  return o;
}

const hangwatch::OpWindowStats* find(const hangwatch::MetricsWindow& w, const std::string& name) {
  for (const auto& o : w.ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("AllReduceReportsNcclTestsAlgbwAndBusbw") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  // 1 MB in 1 ms on 4 ranks: algbw 1 GB/s, busbw 1 * 2*3/4.
  m.record(collective("ncclAllReduce", 1'000'000, 4, kStart + 1 * kMs, kStart + 2 * kMs));
  m.record(collective("ncclAllReduce", 1'000'000, 4, kStart + 3 * kMs, kStart + 4 * kMs));
  // 1 MB per rank gathered from 4 ranks in 2 ms: size 4 MB, algbw 2, busbw 2 * 3/4.
  m.record(collective("ncclAllGather", 1'000'000, 4, kStart + 5 * kMs, kStart + 7 * kMs));
  m.flush(kStart + 10 * kMs);
  const auto& w = m.lastWindow();
  const auto* ar = find(w, "ncclAllReduce");
  REQUIRE(ar);
  CHECK(ar->count == 2);
  CHECK(ar->comm_size == 4);
  CHECK(ar->comm == "0xc0fff2");
  CHECK(ar->comm_rank == 1);
  CHECK(*ar->algbw_gbps == Approx(1.0));
  CHECK(*ar->busbw_gbps == Approx(1.5));
  const auto* ag = find(w, "ncclAllGather");
  REQUIRE(ag);
  CHECK(*ag->algbw_gbps == Approx(2.0));
  CHECK(*ag->busbw_gbps == Approx(1.5));
}

TEST_CASE("GemmReportsAchievedTflopsPerShape") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  CompletedOp g = op(OpClass::kGemm, "cublasGemmEx", kStart + kMs, kStart + 2 * kMs);
  g.m = g.n = g.k = 1024;  // flops left 0: computed from the shape
  m.record(g);
  CompletedOp b = op(OpClass::kGemm, "cublasGemmEx", kStart + 3 * kMs, kStart + 5 * kMs);
  b.m = 512;
  b.n = 256;
  b.k = 128;
  b.batch = 8;
  b.flops = 2.0 * 512 * 256 * 128 * 8;
  m.record(b);
  m.flush(kStart + 10 * kMs);
  const auto& w = m.lastWindow();
  REQUIRE(w.ops.size() == 2);
  for (const auto& o : w.ops) {
    if (o.shape == "1024x1024x1024") {
      CHECK(*o.tflops == Approx(2.0 * 1024 * 1024 * 1024 / 1e-3 / 1e12));
    } else {
      CHECK(o.shape == "512x256x128x8");
      CHECK(*o.tflops == Approx(2.0 * 512 * 256 * 128 * 8 / 2e-3 / 1e12));
    }
  }
}

TEST_CASE("DurationPercentilesComeFromTheKeysHistogram") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  for (int i = 1; i <= 100; ++i) {
    int64_t start = kStart + i * kMs;
    m.record(op(OpClass::kKernel, "sgd_update", start, start + i * 1000));
  }
  m.flush(kStart + 200 * kMs);
  const auto* k = find(m.lastWindow(), "sgd_update");
  REQUIRE(k);
  CHECK(k->count == 100);
  CHECK(k->max_ns == 100000);
  CHECK(k->total_ns == 5050 * 1000);
  CHECK(k->p50_ns == Approx(50000).epsilon(0.091));
  CHECK(k->p99_ns == Approx(99000).epsilon(0.091));
}

TEST_CASE("KeysBeyondTheCapAreCountedAsOther") {
  TempDir dir;
  MetricsConfig c = configIn(dir);
  c.max_keys = 3;
  MetricsWindows m(c);
  const char* names[] = {"k0", "k1", "k2", "k3", "k4"};
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      int64_t start = kStart + (round * 10 + i) * kMs;
      m.record(op(OpClass::kKernel, names[i], start, start + 1000));
    }
  }
  m.flush(kStart + 100 * kMs);
  const auto& w = m.lastWindow();
  CHECK(w.ops.size() == 3);
  CHECK(w.other_count == 4);
  CHECK(w.other_ns == 4000);
  // A new window starts with an empty table.
  m.record(op(OpClass::kKernel, "k4", kStart + 101 * kMs, kStart + 102 * kMs));
  m.flush(kStart + 200 * kMs);
  REQUIRE(m.lastWindow().ops.size() == 1);
  CHECK(m.lastWindow().ops[0].name == "k4");
  CHECK(m.lastWindow().other_count == 0);
}

TEST_CASE("WindowsAreWrittenOnlyWhenTheIntervalHasElapsed") {
  TempDir dir;
  MetricsConfig c = configIn(dir, 1.0);
  MetricsWindows m(c);
  m.record(op(OpClass::kKernel, "k", kStart + kMs, kStart + 2 * kMs));
  m.maybeFlush(kStart + 500 * kMs);
  CHECK_FALSE(std::filesystem::exists(c.path));
  m.maybeFlush(kStart + 1000 * kMs);
  CHECK(linesOf(c.path).size() == 1);
  m.maybeFlush(kStart + 1500 * kMs);
  CHECK(linesOf(c.path).size() == 1);
  m.maybeFlush(kStart + 2100 * kMs);
  auto lines = linesOf(c.path);
  REQUIRE(lines.size() == 2);
  auto second = hangwatch::metricsWindowFromLine(lines[1]);
  REQUIRE(second.ok());
  CHECK(second->start_mono_ns == kStart + 1000 * kMs);
  CHECK(second->end_mono_ns == kStart + 2100 * kMs);
  CHECK(second->ops.empty());
  CHECK(second->void_ns == 1100 * kMs);
}

TEST_CASE("EveryWindowIsOneLineThatPythonJsonLoads") {
  TempDir dir;
  MetricsConfig c = configIn(dir);
  MetricsWindows m(c);
  for (int w = 0; w < 3; ++w) {
    int64_t base = kStart + w * 1000 * kMs;
    m.record(op(OpClass::kKernel, "weird\xff\"name\n", base + kMs, base + 2 * kMs));
    m.record(collective("ncclAllReduce", 4096, 4, base + 3 * kMs, base + 4 * kMs));
    m.recordHostSync({"cudaStreamSynchronize", base + 4 * kMs, base + 5 * kMs});
    m.flush(base + 1000 * kMs);
  }
  auto lines = linesOf(c.path);
  REQUIRE(lines.size() == 3);
  for (const auto& line : lines) {
    auto w = hangwatch::metricsWindowFromLine(line);
    REQUIRE(w.ok());
    CHECK(w->rank == 2);
    CHECK(w->host == "testhost");
    CHECK(w->pid == getpid());
    CHECK(w->end_unix_s > w->start_unix_s);
  }
  if (std::system("python3 -c 'pass' >/dev/null 2>&1") == 0) {
    std::string cmd = "python3 -c 'import json,sys; n=sum(1 for l in open(sys.argv[1]) if json.loads(l)); "
                      "sys.exit(0 if n == 3 else 1)' " + c.path;
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("UnwritableMetricsPathIsLoggedOnceAndNeverThrows") {
  TempDir dir;
  std::string blocker = dir.path + "/metrics";
  std::ofstream(blocker) << "a file where the directory should be";
  MetricsConfig c = configIn(dir);
  int failures = 0;
  c.log_failure = [&](const std::string&) { ++failures; };
  MetricsWindows m(c);
  for (int w = 1; w <= 3; ++w) {
    m.record(op(OpClass::kKernel, "k", kStart + w * kMs, kStart + w * kMs + 10));
    CHECK_NOTHROW(m.flush(kStart + w * 1000 * kMs));
  }
  CHECK(failures == 1);
  CHECK(m.writeFailed());
}

TEST_CASE("HostSynchronizationCountAndTimeAreSummedPerCall") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  m.recordHostSync({"cudaStreamSynchronize", kStart + 1 * kMs, kStart + 3 * kMs});
  m.recordHostSync({"cudaStreamSynchronize", kStart + 4 * kMs, kStart + 5 * kMs});
  m.recordHostSync({"cudaStreamWaitEvent", kStart + 6 * kMs, kStart + 6 * kMs});
  m.flush(kStart + 10 * kMs);
  const auto& w = m.lastWindow();
  CHECK(w.sync_count == 3);
  CHECK(w.sync_ns == 3 * kMs);
  REQUIRE(w.syncs.size() == 2);
  CHECK(w.syncs[0].call == "cudaStreamSynchronize");
  CHECK(w.syncs[0].count == 2);
  CHECK(w.syncs[1].total_ns == 0);
}

TEST_CASE("IssueLatencyIsHistogrammedPerOpClass") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  for (int i = 0; i < 10; ++i) {
    CompletedOp g = op(OpClass::kGemm, "cublasGemmEx", kStart + (i + 1) * kMs, kStart + (i + 1) * kMs + 100);
    g.host_issue_ns = g.gpu_start_ns - 200000;  // host ran 200 us ahead
    m.record(g);
  }
  CompletedOp late = op(OpClass::kKernel, "k", kStart + 20 * kMs, kStart + 21 * kMs);
  late.host_issue_ns = late.gpu_start_ns + 500;  // clock noise: counted as 0
  m.record(late);
  m.flush(kStart + 30 * kMs);
  const auto& w = m.lastWindow();
  REQUIRE(w.issue_latency.count("gemm") == 1);
  CHECK(w.issue_latency.at("gemm").count() == 10);
  CHECK(w.issue_latency.at("gemm").percentileNs(0.5) == Approx(200000).epsilon(0.091));
  CHECK(w.issue_latency.at("kernel").at(0) == 1);
  CHECK(w.issue_latency.count("coll") == 0);
}

TEST_CASE("StepTimeIsInferredFromTheLargestCommunicatorsCollective") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  for (int s = 0; s < 6; ++s) {
    int64_t base = kStart + s * 10 * kMs;
    m.record(collective("ncclAllGather", 8192, 2, base + 1 * kMs, base + 2 * kMs));   // tensor-parallel pair
    m.record(collective("ncclAllReduce", 65536, 4, base + 5 * kMs, base + 6 * kMs));  // gradients, world
  }
  m.flush(kStart + 100 * kMs);
  const auto& w = m.lastWindow();
  REQUIRE(w.step);
  CHECK(w.step->source == "anchor");
  CHECK(w.step->anchor.find("ncclAllReduce") == 0);
  CHECK(w.step->count == 5);
  CHECK(w.step->total_ns == 50 * kMs);
  CHECK(w.step->p50_ns == Approx(10 * kMs).epsilon(0.091));
  CHECK(w.step->max_ns == 10 * kMs);
  REQUIRE(w.inter_step_void_ns);
}

TEST_CASE("ExplicitStepEndsReplaceTheInferredAnchor") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  for (int s = 0; s < 4; ++s) {
    int64_t base = kStart + s * 20 * kMs;
    m.record(collective("ncclAllReduce", 65536, 4, base + 5 * kMs, base + 6 * kMs));
    m.recordStepEnd(base + 19 * kMs);
  }
  m.flush(kStart + 100 * kMs);
  const auto& w = m.lastWindow();
  REQUIRE(w.step);
  CHECK(w.step->source == "marker");
  CHECK(w.step->anchor.empty());
  CHECK(w.step->count == 3);
  CHECK(w.step->max_ns == 20 * kMs);
}

TEST_CASE("DataloaderGapShowsAsInterStepVoid") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  // Each 10 ms step: the all-reduce that ends the previous step, 2 ms of nothing while
  // the host loads the next batch, then 6 ms of GEMMs with 0.5 ms gaps between them.
  for (int s = 0; s < 5; ++s) {
    int64_t base = kStart + s * 10 * kMs;
    m.record(collective("ncclAllReduce", 65536, 4, base, base + kMs));
    m.record(op(OpClass::kGemm, "cublasGemmEx", base + 3 * kMs, base + 6 * kMs));
    m.record(op(OpClass::kGemm, "cublasGemmEx", base + 6 * kMs + kMs / 2, base + 9 * kMs + kMs / 2));
  }
  m.flush(kStart + 50 * kMs);
  const auto& w = m.lastWindow();
  CHECK(w.busy_ns == 5 * 7 * kMs);
  CHECK(w.void_ns == 5 * 3 * kMs);
  REQUIRE(w.inter_step_void_ns);
  // Every step's longest gap is the 2 ms after its all-reduce.
  CHECK(*w.inter_step_void_ns == 5 * 2 * kMs);
  REQUIRE(w.streams.size() == 1);
  CHECK(w.streams[0].busy_ns == 5 * 7 * kMs);
}

TEST_CASE("OpsWithoutGpuTimesAreCountedAsDropped") {
  TempDir dir;
  MetricsWindows m(configIn(dir));
  m.record(op(OpClass::kKernel, "k", 0, 0));
  m.record(op(OpClass::kKernel, "k", kStart + 5 * kMs, kStart + 4 * kMs));
  m.noteDropped(3);
  m.flush(kStart + 10 * kMs);
  CHECK(m.lastWindow().dropped == 5);
  CHECK(m.lastWindow().ops.empty());
  m.flush(kStart + 20 * kMs);
  CHECK(m.lastWindow().dropped == 0);
}

TEST_CASE("ARestartedRankAppendsToItsExistingMetricsFile") {
  TempDir dir;
  MetricsConfig c = configIn(dir);
  for (int run = 0; run < 2; ++run) {
    MetricsWindows m(c);
    m.record(op(OpClass::kKernel, "k", kStart + kMs, kStart + 2 * kMs));
    m.flush(kStart + 10 * kMs);
  }
  auto lines = linesOf(c.path);
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines) CHECK(hangwatch::metricsWindowFromLine(line).ok());
}
