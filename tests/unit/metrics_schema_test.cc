#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "hangwatch/common/metrics_window.h"

using hangwatch::MetricsWindow;

namespace {

MetricsWindow fullWindow() {
  MetricsWindow w;
  w.rank = 3;
  w.host = "node17";
  w.pid = 4242;
  w.device = 6;
  w.start_unix_s = 1790000000.5;
  w.end_unix_s = 1790000010.5;
  w.start_mono_ns = 1000;
  w.end_mono_ns = 10000001000;
  hangwatch::OpWindowStats gemm;
  gemm.cls = "gemm";
  gemm.name = "cublasGemmEx";
  gemm.shape = "256x32x256";
  gemm.count = 40;
  gemm.total_ns = 400000;
  gemm.durations.add(10000, 40);
  gemm.p50_ns = gemm.durations.percentileNs(0.5);
  gemm.p99_ns = gemm.durations.percentileNs(0.99);
  gemm.max_ns = 10500;
  gemm.tflops = 0.42;
  hangwatch::OpWindowStats ar;
  ar.cls = "coll";
  ar.name = "ncclAllReduce";
  ar.comm = "0xabc";
  ar.comm_size = 4;
  ar.comm_rank = 1;
  ar.bytes = 1 << 20;
  ar.count = 10;
  ar.total_ns = 5000000;
  ar.durations.add(500000, 10);
  ar.algbw_gbps = 2.1;
  ar.busbw_gbps = 3.15;
  hangwatch::OpWindowStats send;
  send.cls = "p2p";
  send.name = "ncclSend";
  send.comm = "0xabc";
  send.comm_size = 4;
  send.peer = 2;
  send.count = 1;
  w.ops = {gemm, ar, send};
  w.other_count = 5;
  w.other_ns = 123;
  w.issue_latency["gemm"].add(3000, 40);
  w.issue_latency["coll"].add(100000, 10);
  w.busy_ns = 6000000000;
  w.void_ns = 4000000000;
  w.inter_step_void_ns = 2500000000;
  w.streams = {{"0x5", 5000000000}, {"0x9", 1000000000}};
  w.sync_count = 11;
  w.sync_ns = 777;
  w.syncs = {{"cudaDeviceSynchronize", 1, 77}, {"cudaStreamSynchronize", 10, 700}};
  w.step = hangwatch::StepStats{"anchor", "ncclAllReduce 0xabc 1048576", 9, 9000000000, 1e9, 1100000000};
  w.dropped = 2;
  w.links = {{"0x1234abcd", 4, 3, 0, 8u << 20, 128, 16000000}, {"0x99", 2, 1, 0, 4096, 1, 2000}};
  return w;
}

}  // namespace

TEST_CASE("MetricsWindowRoundTripsThroughOneJsonLine") {
  MetricsWindow w = fullWindow();
  std::string line = hangwatch::toJson(w).dump();
  REQUIRE(line.find('\n') == std::string::npos);
  auto back = hangwatch::metricsWindowFromLine(line);
  REQUIRE(back.ok());
  CHECK(back->schema_version == 1);
  CHECK(back->rank == 3);
  CHECK(back->host == "node17");
  CHECK(back->pid == 4242);
  CHECK(back->device == 6);
  CHECK(back->start_unix_s == w.start_unix_s);
  CHECK(back->end_unix_s == w.end_unix_s);
  CHECK(back->start_mono_ns == w.start_mono_ns);
  CHECK(back->end_mono_ns == w.end_mono_ns);
  REQUIRE(back->ops.size() == 3);
  const auto& g = back->ops[0];
  CHECK(g.cls == "gemm");
  CHECK(g.shape == "256x32x256");
  CHECK(g.count == 40);
  CHECK(g.total_ns == 400000);
  CHECK(g.p50_ns == Approx(w.ops[0].p50_ns).margin(1));
  CHECK(g.max_ns == 10500);
  CHECK(g.durations.count() == 40);
  CHECK(g.tflops == Approx(0.42));
  CHECK_FALSE(g.algbw_gbps);
  const auto& a = back->ops[1];
  CHECK(a.comm == "0xabc");
  CHECK(a.comm_size == 4);
  CHECK(a.comm_rank == 1);
  CHECK_FALSE(back->ops[2].comm_rank);
  CHECK(a.bytes == (1u << 20));
  CHECK(a.algbw_gbps == Approx(2.1));
  CHECK(a.busbw_gbps == Approx(3.15));
  CHECK_FALSE(a.peer);
  CHECK(back->ops[2].peer == 2);
  CHECK(back->other_count == 5);
  CHECK(back->other_ns == 123);
  REQUIRE(back->issue_latency.size() == 2);
  CHECK(back->issue_latency.at("gemm").count() == 40);
  CHECK(hangwatch::issueLatencyAllClasses(*back).count() == 50);
  CHECK(back->busy_ns == w.busy_ns);
  CHECK(back->void_ns == w.void_ns);
  CHECK(back->inter_step_void_ns == w.inter_step_void_ns);
  REQUIRE(back->streams.size() == 2);
  CHECK(back->streams[1].stream == "0x9");
  CHECK(back->streams[1].busy_ns == 1000000000);
  CHECK(back->sync_count == 11);
  CHECK(back->sync_ns == 777);
  REQUIRE(back->syncs.size() == 2);
  CHECK(back->syncs[1].call == "cudaStreamSynchronize");
  CHECK(back->syncs[1].count == 10);
  CHECK(back->syncs[1].total_ns == 700);
  REQUIRE(back->step);
  CHECK(back->step->source == "anchor");
  CHECK(back->step->anchor == w.step->anchor);
  CHECK(back->step->count == 9);
  CHECK(back->step->p50_ns == 1e9);
  CHECK(back->step->max_ns == 1100000000);
  CHECK(back->dropped == 2);
  REQUIRE(back->links.size() == 2);
  CHECK(back->links[0].comm == "0x1234abcd");
  CHECK(back->links[0].comm_size == 4);
  CHECK(back->links[0].comm_rank == 3);
  CHECK(back->links[0].peer == 0);
  CHECK(back->links[0].bytes == (8u << 20));
  CHECK(back->links[0].steps == 128);
  CHECK(back->links[0].busy_ns == 16000000);
  CHECK(back->links[1].comm == "0x99");
}

TEST_CASE("TheWindowLineKeepsItsKeysAndEncodings") {
  // What the hand-written writer produced before the window got a field list: other tools
  // read these files, so the line is a format, not an implementation detail. Rates keep 4
  // digits, percentiles whole ns, the wall clock ms, "np"/"cr" only with "cm", "b" only
  // when non-zero, "dev" only when known, "sync.by" [count, ns] pairs.
  CHECK(hangwatch::toJson(fullWindow()).dump() ==
        R"({"busy":6000000000,"dev":6,"drop":2,"host":"node17","il":{"coll":[66,10],"gemm":[46,40]},"lk":[{"b":8388608,"cnt":128,"cr":3,"nc":"0x1234abcd","np":4,"ns":16000000,"peer":0},{"b":4096,"cnt":1,"cr":1,"nc":"0x99","np":2,"ns":2000,"peer":0}],"m0":1000,"m1":10000001000,"ops":[{"c":"gemm","cnt":40,"h":[53,40],"max":10500,"n":"cublasGemmEx","ns":400000,"p50":10623,"p99":10623,"sh":"256x32x256","tf":0.42},{"alg":2.1,"b":1048576,"bus":3.15,"c":"coll","cm":"0xabc","cnt":10,"cr":1,"h":[75,10],"max":0,"n":"ncclAllReduce","np":4,"ns":5000000,"p50":0,"p99":0},{"c":"p2p","cm":"0xabc","cnt":1,"h":[],"max":0,"n":"ncclSend","np":4,"ns":0,"p50":0,"p99":0,"peer":2}],"oth":{"cnt":5,"ns":123},"pid":4242,"rank":3,"st":[{"busy":5000000000,"s":"0x5"},{"busy":1000000000,"s":"0x9"}],"step":{"cnt":9,"key":"ncclAllReduce 0xabc 1048576","max":1100000000,"ns":9000000000,"p50":1000000000,"src":"anchor"},"sync":{"by":{"cudaDeviceSynchronize":[1,77],"cudaStreamSynchronize":[10,700]},"cnt":11,"ns":777},"t0":1790000000.5,"t1":1790000010.5,"v":1,"void":4000000000,"vstep":2500000000})");
}

TEST_CASE("WindowWithoutLinksWritesNoLinkKey") {
  MetricsWindow w;
  CHECK_FALSE(hangwatch::toJson(w).contains("lk"));
  auto back = hangwatch::metricsWindowFromJson(hangwatch::toJson(w));
  REQUIRE(back.ok());
  CHECK(back->links.empty());
  auto bad = hangwatch::metricsWindowFromLine(R"({"lk": [3]})");
  CHECK_FALSE(bad.ok());
}

TEST_CASE("WindowWithoutStepsWritesNullsAndReadsBackUnset") {
  MetricsWindow w;
  auto back = hangwatch::metricsWindowFromJson(nlohmann::json::parse(hangwatch::toJson(w).dump()));
  REQUIRE(back.ok());
  CHECK_FALSE(back->step);
  CHECK_FALSE(back->inter_step_void_ns);
  CHECK(back->ops.empty());
}

TEST_CASE("ReaderFillsDefaultsForMissingFields") {
  auto w = hangwatch::metricsWindowFromLine(R"({"rank": 5, "ops": [{"c": "gemm", "n": "cublasSgemm_v2"}]})");
  REQUIRE(w.ok());
  CHECK(w->rank == 5);
  CHECK(w->schema_version == 1);
  CHECK(w->host.empty());
  REQUIRE(w->ops.size() == 1);
  CHECK(w->ops[0].count == 0);
  CHECK(w->ops[0].durations.empty());
  CHECK_FALSE(w->ops[0].tflops);
  CHECK_FALSE(w->step);
  CHECK(hangwatch::metricsWindowFromLine("{}").ok());
}

TEST_CASE("ReaderIgnoresUnknownFieldsOfNewerWriters") {
  auto w = hangwatch::metricsWindowFromLine(R"({"v": 2, "rank": 1, "future": {"x": [1, 2]}, "ops": []})");
  REQUIRE(w.ok());
  CHECK(w->schema_version == 2);
  CHECK(w->rank == 1);
}

TEST_CASE("ReaderTurnsGarbageAndTruncatedLinesIntoErrors") {
  CHECK_FALSE(hangwatch::metricsWindowFromLine("not json at all").ok());
  std::string line = hangwatch::toJson(MetricsWindow{}).dump();
  CHECK_FALSE(hangwatch::metricsWindowFromLine(line.substr(0, line.size() / 2)).ok());
  CHECK_FALSE(hangwatch::metricsWindowFromLine("[1, 2, 3]").ok());
  auto wrong = hangwatch::metricsWindowFromLine(R"({"ops": "many"})");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().find("metrics window") != std::string::npos);
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"ops": [{"h": [999, 1]}]})").ok());
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"sync": {"by": {"x": 3}}})").ok());
}

TEST_CASE("MetricsFileReaderSkipsBadLinesAndCountsThem") {
  char path[] = "/tmp/metrics_schema_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  MetricsWindow w = fullWindow();
  {
    std::ofstream out(path);
    out << hangwatch::toJson(w).dump() << "\n"
        << "garbage\n"
        << "\n"
        << hangwatch::toJson(w).dump() << "\n"
        << hangwatch::toJson(w).dump().substr(0, 40);  // a torn last line
  }
  auto f = hangwatch::readMetricsFile(path);
  std::remove(path);
  REQUIRE(f.ok());
  CHECK(f->windows.size() == 2);
  CHECK(f->bad_lines == 2);
  CHECK_FALSE(hangwatch::readMetricsFile("/nonexistent/dir/r00000.jsonl").ok());
}

TEST_CASE("PercentilesNoInt64HoldsAreErrorsNotCasts") {
  // Found by tests/fuzz (metrics_line): a p50 of 6.7e127 went through a double and was
  // cast to int64 when the window was written again.
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"ops": [{"c": "gemm", "p50": 6.7e127}]})").ok());
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"ops": [{"c": "gemm", "p99": -1e19}]})").ok());
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"step": {"p50": 1e300}})").ok());
  auto ok = hangwatch::metricsWindowFromLine(R"({"ops": [{"c": "gemm", "p50": 2286960}], "step": {"p50": 61539099}})");
  REQUIRE(ok.ok());
  CHECK(ok->ops[0].p50_ns == 2286960);
  CHECK(ok->step->p50_ns == 61539099);
}

TEST_CASE("SyncCountsAndTimesNoIntegerHoldsAreErrorsNotCasts") {
  // Found by tests/fuzz (metrics_line): sync.by entries went through an unchecked get<int64_t>.
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"sync": {"by": {"cudaStreamSynchronize": [10, 2.9e130]}}})").ok());
  CHECK_FALSE(hangwatch::metricsWindowFromLine(R"({"sync": {"by": {"cudaStreamSynchronize": [-1, 5]}}})").ok());
  auto ok = hangwatch::metricsWindowFromLine(R"({"sync": {"by": {"cudaStreamSynchronize": [10, 943070941]}}})");
  REQUIRE(ok.ok());
  CHECK(ok->syncs[0].total_ns == 943070941);
}
