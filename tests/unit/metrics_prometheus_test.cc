#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hangwatch/common/metrics_window.h"
#include "hangwatch/watchdog/metrics/metrics_windows.h"
#include "hangwatch/watchdog/metrics/prometheus_textfile.h"
#include "test_env.h"

using hangwatch::LinkWindowStats;
using hangwatch::MetricsWindow;
using hangwatch::OpWindowStats;
using hangwatch::StepStats;
using hangwatch::watchdog::CompletedOp;
using hangwatch::watchdog::MetricsConfig;
using hangwatch::watchdog::MetricsWindows;
using hangwatch::watchdog::OpClass;
using hangwatch::watchdog::PrometheusTextfile;

using test_support::TempDir;

using test_support::kMs;

namespace {

constexpr int64_t kS = 1'000'000'000;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

OpWindowStats op(const char* cls, const char* name, int64_t each_ns, uint64_t count) {
  OpWindowStats o;
  o.cls = cls;
  o.name = name;
  o.count = count;
  o.total_ns = each_ns * static_cast<int64_t>(count);
  o.durations.add(each_ns, static_cast<uint32_t>(count));
  return o;
}

OpWindowStats allReduce(uint64_t bytes, int64_t each_ns, uint64_t count, double algbw, double busbw) {
  OpWindowStats o = op("coll", "ncclAllReduce", each_ns, count);
  o.comm = "0xc0ffee";
  o.comm_size = 4;
  o.bytes = bytes;
  o.algbw_gbps = algbw;
  o.busbw_gbps = busbw;
  return o;
}

OpWindowStats gemm(const char* name, const char* shape, int64_t each_ns, uint64_t count, double tflops) {
  OpWindowStats o = op("gemm", name, each_ns, count);
  o.shape = shape;
  o.tflops = tflops;
  return o;
}

// One 10 s window of rank 3: two AllReduce sizes on one communicator, one GEMM shape
// from two APIs, a kernel, issue latencies, 5 steps and one network link.
MetricsWindow window() {
  MetricsWindow w;
  w.rank = 3;
  w.host = "node-7";
  w.start_mono_ns = 100 * kS;
  w.end_mono_ns = 110 * kS;
  w.void_ns = 2'500 * kMs;
  w.ops.push_back(allReduce(1 << 20, 10 * kMs, 4, 1.0, 1.5));
  w.ops.push_back(allReduce(4 << 20, 40 * kMs, 1, 2.0, 3.0));
  w.ops.push_back(gemm("cublasGemmEx", "512x512x512", 5 * kMs, 4, 0.5));
  w.ops.push_back(gemm("cublasLtMatmul", "512x512x512", 5 * kMs, 4, 1.0));
  w.ops.push_back(op("kernel", "elementwise", kMs, 100));
  w.issue_latency["coll"].add(10'000, 2);
  w.issue_latency["gemm"].add(10'000, 1);
  w.step = StepStats{"anchor", "ncclAllReduce", 5, 9 * kS, 1.8e9, 2 * kS};
  w.links.push_back(LinkWindowStats{"0x1234", 4, 3, 0, 1 << 20, 16, 1'500 * kMs});
  return w;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("PrometheusTextOfAWindowIsTheseExactLines") {
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  file.accumulate(w);
  // Merged per (comm, collective): busbw (1.5*40 + 3*40) / 80 ms; per shape: TFLOPS
  // (0.5*20 + 1*20) / 40 ms; percentiles at the log-histogram bucket's middle (10 us ->
  // 10.62 us, 10 ms -> 10.88 ms, 40 ms -> 43.51 ms).
  CHECK(lines(file.text(w)) ==
        std::vector<std::string>{
            "# HELP hangwatch_hang 1 after the hang trigger fired.",
            "# TYPE hangwatch_hang gauge",
            "hangwatch_hang{rank=\"3\",host=\"node-7\"} 0",
            "# HELP hangwatch_suspected 1 from an early warning until this rank's GPU work moved again.",
            "# TYPE hangwatch_suspected gauge",
            "hangwatch_suspected{rank=\"3\",host=\"node-7\"} 0",
            "# HELP hangwatch_dump_fallback 1 once the dump folder failed or stalled and this rank's dumps go to "
            "the node-local folder named.",
            "# TYPE hangwatch_dump_fallback gauge",
            "hangwatch_dump_fallback{rank=\"3\",host=\"node-7\"} 0",
            "# HELP hangwatch_steps_total Steps completed.",
            "# TYPE hangwatch_steps_total counter",
            "hangwatch_steps_total{rank=\"3\",host=\"node-7\"} 5",
            "# HELP hangwatch_void_ratio GPU idle share of the window.",
            "# TYPE hangwatch_void_ratio gauge",
            "hangwatch_void_ratio{rank=\"3\",host=\"node-7\"} 0.25",
            "# HELP hangwatch_issue_latency_seconds Kernel issue latency.",
            "# TYPE hangwatch_issue_latency_seconds gauge",
            "hangwatch_issue_latency_seconds{rank=\"3\",host=\"node-7\",percentile=\"50\"} 1.062e-05",
            "hangwatch_issue_latency_seconds{rank=\"3\",host=\"node-7\",percentile=\"99\"} 1.062e-05",
            "# HELP hangwatch_busbw_gbps Bus bandwidth, GB/s.",
            "# TYPE hangwatch_busbw_gbps gauge",
            "hangwatch_busbw_gbps{rank=\"3\",host=\"node-7\",comm=\"0xc0ffee\",collective=\"ncclAllReduce\"} 2.25",
            "# HELP hangwatch_algbw_gbps Algorithm bandwidth, GB/s.",
            "# TYPE hangwatch_algbw_gbps gauge",
            "hangwatch_algbw_gbps{rank=\"3\",host=\"node-7\",comm=\"0xc0ffee\",collective=\"ncclAllReduce\"} 1.5",
            "# HELP hangwatch_collective_seconds Collective duration.",
            "# TYPE hangwatch_collective_seconds gauge",
            "hangwatch_collective_seconds{rank=\"3\",host=\"node-7\",comm=\"0xc0ffee\",collective=\"ncclAllReduce\","
            "percentile=\"50\"} 0.01088",
            "hangwatch_collective_seconds{rank=\"3\",host=\"node-7\",comm=\"0xc0ffee\",collective=\"ncclAllReduce\","
            "percentile=\"99\"} 0.04351",
            "# HELP hangwatch_gemm_tflops GEMM TFLOPS.",
            "# TYPE hangwatch_gemm_tflops gauge",
            "hangwatch_gemm_tflops{rank=\"3\",host=\"node-7\",shape=\"512x512x512\"} 0.75",
            "# HELP hangwatch_link_wire_seconds_total Send time on the wire.",
            "# TYPE hangwatch_link_wire_seconds_total counter",
            "hangwatch_link_wire_seconds_total{rank=\"3\",host=\"node-7\",comm=\"0x1234\",peer=\"0\"} 1.5",
        });
}

TEST_CASE("PrometheusLabelValuesEscapeBackslashQuoteAndNewline") {
  CHECK(hangwatch::watchdog::escapePrometheusLabelValue("a\\b\"c\nd") == "a\\\\b\\\"c\\nd");
  CHECK(hangwatch::watchdog::escapePrometheusLabelValue("node-7.cluster") == "node-7.cluster");
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  w.host = "odd\"host\n";
  w.ops[2].shape = "5\\12";
  std::string text = file.text(w);
  CHECK(text.find("hangwatch_hang{rank=\"3\",host=\"odd\\\"host\\n\"} 0\n") != std::string::npos);
  CHECK(text.find("shape=\"5\\\\12\"") != std::string::npos);
}

TEST_CASE("PrometheusHangGaugeTurnsOneOnceTheTriggerFired") {
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  CHECK(file.text(w).find("hangwatch_hang{rank=\"3\",host=\"node-7\"} 0\n") != std::string::npos);
  file.markHang();
  CHECK(file.text(w).find("hangwatch_hang{rank=\"3\",host=\"node-7\"} 1\n") != std::string::npos);
  MetricsWindow later = window();
  later.start_mono_ns += 10 * kS;
  later.end_mono_ns += 10 * kS;
  CHECK(file.text(later).find("hangwatch_hang{rank=\"3\",host=\"node-7\"} 1\n") != std::string::npos);
}

TEST_CASE("PrometheusDumpFallbackGaugeNamesTheFolderTheDumpsGoTo") {
  TempDir dir;
  PrometheusTextfile file(dir.path + "/hangwatch_r00003.prom", nullptr);
  MetricsWindow w = window();
  file.write(w);
  file.markDumpFallback("/var/tmp/hangwatch-fallback/job-7", w);
  // Rewritten at once, not at the next window: an alert on it need not wait.
  std::ifstream in(dir.path + "/hangwatch_r00003.prom");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("hangwatch_dump_fallback{rank=\"3\",host=\"node-7\",dir=\"/var/tmp/hangwatch-fallback/job-7\"} 1\n") !=
        std::string::npos);
}

TEST_CASE("PrometheusCountersKeepCountingAcrossWindows") {
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  file.accumulate(w);
  file.accumulate(w);
  MetricsWindow quiet = window();
  quiet.step.reset();
  quiet.links.clear();
  file.accumulate(quiet);
  std::string text = file.text(quiet);
  CHECK(text.find("hangwatch_steps_total{rank=\"3\",host=\"node-7\"} 10\n") != std::string::npos);
  CHECK(text.find("comm=\"0x1234\",peer=\"0\"} 3\n") != std::string::npos);
}

TEST_CASE("PrometheusSeriesGoToTheBusiestGemmShapesOnly") {
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  w.ops.clear();
  w.links.clear();
  const char* shapes[] = {"64x64x64", "128x128x128", "256x256x256", "512x512x512", "1024x1024x1024", "2048x2048x2048"};
  for (int i = 0; i < 6; ++i) w.ops.push_back(gemm("cublasGemmEx", shapes[i], (20 + i) * kMs, 10, 1.0));
  std::string text = file.text(w);
  INFO(text);
  for (int i = 0; i < 6; ++i)
    CHECK((text.find(std::string("shape=\"") + shapes[i] + "\"") != std::string::npos) == (i >= 2));
}

TEST_CASE("PrometheusTextfileStaysWithin3KBKeepingTheBusiestKeysThatFit") {
  PrometheusTextfile file("", nullptr, "step-0.requeue-12");  // the attempt label is on every series
  MetricsWindow w = window();
  w.host = "gpu-node-a100-0123.cluster.internal";
  w.ops.clear();
  w.links.clear();
  // Busiest last: six collectives and six GEMM shapes, twelve links, long labels.
  std::vector<std::string> colls = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
                                    "ncclReduce", "ncclAlltoAll"};
  std::vector<std::string> shapes = {"12288x49152x12288x8", "12288x12288x12288x8", "49152x12288x12288x8",
                                     "4096x4096x4096", "1024x1024x1024", "128x128x128"};
  for (int i = 0; i < 6; ++i) {
    OpWindowStats c = allReduce(64 << 20, (10 + i) * kMs, 10, 100.5, 180.25);
    c.name = colls[static_cast<size_t>(i)];
    c.comm = "0x8a3fd2c1b0e94f17";
    w.ops.push_back(c);
    w.ops.push_back(gemm("cublasGemmEx", shapes[static_cast<size_t>(i)].c_str(), (20 + i) * kMs, 10, 312.5));
  }
  for (int peer = 0; peer < 12; ++peer)
    w.links.push_back(LinkWindowStats{"0x8a3fd2c1b0e94f17", 64, 3, peer, 1 << 30, 900, 1'234'567'891});
  file.accumulate(w);
  std::string text = file.text(w);
  INFO(text);
  CHECK(text.size() <= PrometheusTextfile::kBudgetBytes);
  CHECK(text.find("hangwatch_hang{") != std::string::npos);
  CHECK(text.find("hangwatch_steps_total{") != std::string::npos);
  CHECK(text.find("hangwatch_issue_latency_seconds{") != std::string::npos);
  // Every kind keeps its busiest key at least (a link series was the one given up at 2 KB).
  CHECK(text.find("hangwatch_busbw_gbps{") != std::string::npos);
  CHECK(text.find("hangwatch_gemm_tflops{") != std::string::npos);
  CHECK(text.find("hangwatch_link_wire_seconds_total{") != std::string::npos);
  // What is left of each kind is its busiest keys: the present ones come first in busiest order.
  auto present = [&](const std::vector<std::string>& busiest_last, const std::string& label) {
    std::vector<bool> out;
    for (auto it = busiest_last.rbegin(); it != busiest_last.rend(); ++it)
      out.push_back(text.find(label + "=\"" + *it + "\"") != std::string::npos);
    return out;
  };
  for (const auto& seen : {present(colls, "collective"), present(shapes, "shape")})
    CHECK(std::is_sorted(seen.begin(), seen.end(), [](bool a, bool b) { return a > b; }));
  CHECK(text.find("collective=\"ncclAlltoAll\"") != std::string::npos);
  CHECK(text.find("shape=\"128x128x128\"") != std::string::npos);
  size_t link_lines = 0;
  for (const std::string& l : lines(text)) link_lines += l.rfind("hangwatch_link_wire_seconds_total{", 0) == 0;
  CHECK(link_lines <= PrometheusTextfile::kMaxLinks);
}

TEST_CASE("PrometheusTextfileIsRewrittenAtomicallyAtEveryWindowAndRemovedAtACleanEnd") {
  TempDir dir;
  std::string path = PrometheusTextfile::pathFor(dir.path + "/textfile", 3);
  CHECK(path == dir.path + "/textfile/hangwatch_r00003.prom");
  {
    MetricsConfig c;
    c.rank = 3;
    c.path = dir.path + "/metrics/r00003.jsonl";
    c.prometheus_path = path;
    c.host = "node-7";
    c.interval_s = 1;
    c.start_ns = 100 * kS;
    MetricsWindows windows(c);
    CompletedOp g;
    g.cls = OpClass::kGemm;
    g.name = "cublasGemmEx";
    g.m = g.n = g.k = 512;
    g.stream = 1;
    g.gpu_start_ns = 100 * kS + kMs;
    g.gpu_end_ns = 100 * kS + 6 * kMs;
    windows.record(g);
    windows.maybeFlush(100 * kS + 500 * kMs);
    CHECK_FALSE(std::filesystem::exists(path));
    windows.maybeFlush(101 * kS);
    std::string first = readFile(path);
    CHECK(first.find("hangwatch_gemm_tflops{rank=\"3\",host=\"node-7\",shape=\"512x512x512\"}") != std::string::npos);
    windows.flush(102 * kS);
    std::string second = readFile(path);
    CHECK(second.find("hangwatch_gemm_tflops") == std::string::npos);  // no GEMM in the second window
    CHECK(second.find("hangwatch_hang{rank=\"3\",host=\"node-7\"} 0") != std::string::npos);
    // Only the .prom itself: no temporary file left where node_exporter looks.
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir.path + "/textfile")) names.push_back(e.path().filename());
    CHECK(names == std::vector<std::string>{"hangwatch_r00003.prom"});
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("PrometheusTextfileStaysAfterAHangWithTheGaugeAtOne") {
  TempDir dir;
  std::string path = PrometheusTextfile::pathFor(dir.path, 0);
  {
    MetricsConfig c;
    c.rank = 0;
    c.path = dir.path + "/metrics/r00000.jsonl";
    c.prometheus_path = path;
    c.start_ns = 100 * kS;
    MetricsWindows windows(c);
    windows.flush(101 * kS);
    CHECK(readFile(path).find("hangwatch_hang{rank=\"0\",host=\"\"} 0") != std::string::npos);
    windows.markHang();
    windows.flush(101 * kS + 200 * kMs);
  }
  CHECK(readFile(path).find("hangwatch_hang{rank=\"0\",host=\"\"} 1") != std::string::npos);
}

TEST_CASE("PrometheusSuspectedIsOneFromTheEarlyWarningUntilTheRankMovesAgain") {
  TempDir dir;
  std::string path = PrometheusTextfile::pathFor(dir.path, 1);
  MetricsConfig c;
  c.rank = 1;
  c.path = dir.path + "/metrics/r00001.jsonl";
  c.prometheus_path = path;
  c.start_ns = 100 * kS;
  MetricsWindows windows(c);
  windows.flush(101 * kS);
  CHECK(readFile(path).find("hangwatch_suspected{rank=\"1\",host=\"\"} 0") != std::string::npos);
  windows.markSuspected(true);  // written at once, not at the next window
  CHECK(readFile(path).find("hangwatch_suspected{rank=\"1\",host=\"\"} 1") != std::string::npos);
  windows.markSuspected(false);
  CHECK(readFile(path).find("hangwatch_suspected{rank=\"1\",host=\"\"} 0") != std::string::npos);
}

TEST_CASE("PrometheusSeriesCarryTheAttempt") {
  // A restarted job's series are told apart from its earlier launch's (the file name is the same).
  TempDir dir;
  std::string path = PrometheusTextfile::pathFor(dir.path, 2);
  MetricsConfig c;
  c.rank = 2;
  c.host = "node-1";
  c.path = dir.path + "/metrics/r00002.jsonl";
  c.prometheus_path = path;
  c.attempt = "restart-1";
  c.start_ns = 100 * kS;
  MetricsWindows windows(c);
  windows.flush(101 * kS);
  CHECK(readFile(path).find("hangwatch_hang{rank=\"2\",host=\"node-1\",attempt=\"restart-1\"} 0") !=
        std::string::npos);
}

TEST_CASE("UnwritablePrometheusDirectoryIsLoggedOnceAndTriedAgainNextWindow") {
  TempDir dir;
  std::string blocker = dir.path + "/not-a-directory";
  std::ofstream(blocker) << "x";
  std::vector<std::string> logged;
  PrometheusTextfile file(blocker + "/hangwatch_r00001.prom", [&](const std::string& m) { logged.push_back(m); });
  MetricsWindow w = window();
  file.write(w);
  file.write(w);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("prometheus textfile not written") != std::string::npos);
  std::filesystem::remove(blocker);
  file.write(w);
  CHECK(std::filesystem::exists(blocker + "/hangwatch_r00001.prom"));
  CHECK(logged.size() == 1);
}

TEST_CASE("PrometheusBandwidthsAverageOnlyTheKeysThatHaveThem") {
  PrometheusTextfile file("", nullptr);
  MetricsWindow w = window();
  w.ops.clear();
  w.ops.push_back(allReduce(1 << 20, 10 * kMs, 1, 1.0, 1.5));
  OpWindowStats no_factor = allReduce(4 << 20, 30 * kMs, 1, 3.0, 0);
  no_factor.busbw_gbps.reset();  // a collective nccl-tests has no bus factor for
  w.ops.push_back(no_factor);
  std::string text = file.text(w);
  INFO(text);
  CHECK(text.find("collective=\"ncclAllReduce\"} 1.5\n") != std::string::npos);  // busbw: the first key only
  CHECK(text.find("hangwatch_algbw_gbps{rank=\"3\",host=\"node-7\",comm=\"0xc0ffee\",collective=\"ncclAllReduce\"} 2.5\n") !=
        std::string::npos);  // (1*10 + 3*30) / 40 ms
}
