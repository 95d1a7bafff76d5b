#pragma once
// One rolling metrics window: one line of metrics/rNNNNN.jsonl (DESIGN.md §4). The
// watchdog writes it every HANGWATCH_METRICS_INTERVAL; the analyzer reads it back.
// Short JSON keys keep a window at a few hundred bytes per step; each record's keys are
// listed once, in its `Schema` below, and drive the writer and the reader. Durations are
// integer ns, bandwidths GB/s (1e9 B/s).
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/schema/window_fields.h"

namespace hangwatch {

// Aggregate of one op key. Keys: collectives by (name, comm, bytes), p2p by (name,
// comm, peer, bytes), GEMMs by (name, shape), memcpys by (name, bytes), kernels by name.
struct OpWindowStats {
  std::string cls;                   // coll | p2p | gemm | kernel | memcpy
  std::string name;                  // API or kernel name
  std::string shape;                 // GEMM "MxNxK", "MxNxKxB" when batched
  std::string comm;                  // communicator hash as hex
  int comm_size = 0;
  std::optional<int> comm_rank;      // this rank in the communicator, names ring links
  std::optional<int> peer;           // p2p only
  uint64_t bytes = 0;                // the API's count*sizeof(dtype)
  uint64_t count = 0;
  int64_t total_ns = 0;              // sum of GPU durations
  double p50_ns = 0;                 // from `durations`, within one bucket
  double p99_ns = 0;
  int64_t max_ns = 0;
  LogHistogram durations;
  std::optional<double> tflops;      // GEMMs, total flops / total time (4 digits, as alg/bus)
  std::optional<double> algbw_gbps;  // nccl-tests size / mean time (memcpy: bytes / mean time)
  std::optional<double> busbw_gbps;  // algbw * nccl-tests factor
};

struct StreamBusy {
  std::string stream;  // stream handle as hex
  int64_t busy_ns = 0;
};

struct HostSyncStats {
  std::string call;
  uint64_t count = 0;
  int64_t total_ns = 0;
};

// Step time. "marker": the watchdog was told where steps end; "anchor": steps are the
// periods between successive completions of one collective key (`anchor`) on the
// largest communicator, which is a sub-step period if that key runs several times a step.
struct StepStats {
  std::string source;     // "marker" or "anchor"
  std::string anchor;     // the anchor key; empty for markers
  uint64_t count = 0;     // completed steps in the window
  int64_t total_ns = 0;
  double p50_ns = 0;
  int64_t max_ns = 0;
};

// One connection this rank sends on over the network, from NCCL's profiler plugin
// (proxy steps): `busy_ns` is the union of its steps' [handed to the network, done]
// intervals, so bytes / busy is what the link achieved while it had data to move.
struct LinkWindowStats {
  std::string comm;     // NCCL's communicator id as hex, the same on every member
  int comm_size = 0;
  int comm_rank = 0;    // this rank in the communicator
  int peer = 0;         // the receiver's rank in the communicator
  uint64_t bytes = 0;
  uint64_t steps = 0;
  int64_t busy_ns = 0;
};

struct MetricsWindow {
  int schema_version = 1;
  int rank = -1;
  std::string host;
  int64_t pid = 0;
  std::optional<int> device;  // the CUDA device it ran on, once the watchdog knew it
  double start_unix_s = 0;         // wall clock, to the ms
  double end_unix_s = 0;
  int64_t start_mono_ns = 0;       // CLOCK_MONOTONIC, the clock of every op time
  int64_t end_mono_ns = 0;
  std::vector<OpWindowStats> ops;
  uint64_t other_count = 0;        // ops whose key did not fit the key cap
  int64_t other_ns = 0;
  // Issue latency (GPU start - host issue, negatives as 0) per op class.
  std::map<std::string, LogHistogram> issue_latency;
  // GPU busy time is the length of the union of all timed ops' [gpu start, gpu end]
  // intervals (every stream) clipped to the window; void = window length - busy.
  int64_t busy_ns = 0;
  int64_t void_ns = 0;
  // The longest idle gap of each step, summed (inter-step void: dataloader, host
  // stalls); void - this is idle between kernels inside steps. Unset without steps.
  std::optional<int64_t> inter_step_void_ns;
  std::vector<StreamBusy> streams; // per-stream busy time (one stream serialises its ops)
  uint64_t sync_count = 0;         // host synchronizations, and per call below
  int64_t sync_ns = 0;
  std::vector<HostSyncStats> syncs;
  std::optional<StepStats> step;   // unset when not known
  std::vector<LinkWindowStats> links;  // empty when NCCL reported no proxy steps
  uint64_t dropped = 0;            // ops the watchdog could not time or keep
};

nlohmann::json toJson(const MetricsWindow& w);
// Tolerant reader (schema/json_codec.h): missing fields keep their defaults, unknown
// fields are ignored; a wrong type is an error naming the window.
Expected<MetricsWindow> metricsWindowFromJson(const nlohmann::json& j);
// One .jsonl line; garbage or a truncated line is an error, never an exception.
Expected<MetricsWindow> metricsWindowFromLine(std::string_view line);

struct MetricsFile {
  std::vector<MetricsWindow> windows;
  int bad_lines = 0;  // unparsable lines, skipped
};
// A whole metrics/rNNNNN.jsonl; an error only when the file cannot be read.
Expected<MetricsFile> readMetricsFile(const std::string& path);

// All op classes' issue latency together.
LogHistogram issueLatencyAllClasses(const MetricsWindow& w);

}  // namespace hangwatch

namespace hangwatch::metrics_codec {

// Rates are estimates from ~9%-wide buckets and jittery timings; 4 significant digits
// keep them exact enough and the line short.
double fourDigits(double v);

template <auto Member>
using StructOf = typename schema::MemberPointer<decltype(Member)>::Struct;

// An optional rate, to 4 significant digits; left out when unknown.
template <auto Member>
struct Rate {
  using Struct = StructOf<Member>;
  static bool omit(const Struct& s) { return !(s.*Member); }
  static void write(nlohmann::json& out, const Struct& s) { out = fourDigits(*(s.*Member)); }
  static void read(const nlohmann::json& v, Struct& s, const char* what) {
    schema::detail::read(v, s, schema::field("", Member, what));
  }
};

// A duration kept as a double (a percentile), written and read as whole ns: a value no
// int64 holds is a read error, not an out-of-range cast when the window is written again.
template <auto Member>
struct WholeNs {
  using Struct = StructOf<Member>;
  static void write(nlohmann::json& out, const Struct& s) { out = static_cast<int64_t>(s.*Member); }
  static void read(const nlohmann::json& v, Struct& s, const char* what) {
    if (v.is_null()) return;
    int64_t ns = 0;
    schema::detail::readValue(v, ns, what);
    s.*Member = static_cast<double>(ns);
  }
};

// Wall-clock seconds to the millisecond: they only place windows on a calendar.
template <auto Member>
struct Millis {
  using Struct = StructOf<Member>;
  static void write(nlohmann::json& out, const Struct& s) { out = std::round(s.*Member * 1e3) / 1e3; }
  static void read(const nlohmann::json& v, Struct& s, const char* what) {
    schema::detail::read(v, s, schema::field("", Member, what));
  }
};

// An op's place in its communicator: written only for an op on one.
template <auto Member>
struct InComm {
  using Struct = StructOf<Member>;
  static bool omit(const Struct& s) { return s.comm.empty() || schema::detail::isEmpty(s.*Member); }
  static void write(nlohmann::json& out, const Struct& s) { out = schema::detail::valueJson(s.*Member); }
  static void read(const nlohmann::json& v, Struct& s, const char* what) {
    schema::detail::read(v, s, schema::field("", Member, what));
  }
};

// "oth": {"cnt", "ns"}.
struct CountAndNs {
  uint64_t count = 0;
  int64_t ns = 0;
};

// One call's entry in "sync.by": a `[count, ns]` pair.
struct CallTotal {
  uint64_t count = 0;
  int64_t ns = 0;
  nlohmann::json toJson() const { return nlohmann::json::array({count, ns}); }
  static Expected<CallTotal> fromJson(const nlohmann::json& j);
};

// "sync": {"cnt", "ns", "by": {call: [cnt, ns]}}.
struct SyncTotals {
  uint64_t count = 0;
  int64_t ns = 0;
  std::map<std::string, CallTotal> by;
};

struct OtherOps {
  using Struct = MetricsWindow;
  static void write(nlohmann::json& out, const MetricsWindow& w);
  static void read(const nlohmann::json& v, MetricsWindow& w, const char* what);
};

struct Syncs {
  using Struct = MetricsWindow;
  static void write(nlohmann::json& out, const MetricsWindow& w);
  static void read(const nlohmann::json& v, MetricsWindow& w, const char* what);
};

}  // namespace hangwatch::metrics_codec

namespace hangwatch::schema {

template <>
struct Schema<OpWindowStats> {
  static constexpr const char* what = "op";
  static constexpr auto fields = std::tuple{
      field("c", &OpWindowStats::cls, "op c"),
      field("n", &OpWindowStats::name, "op n"),
      field("sh", &OpWindowStats::shape, "op sh", Empty::kOmit),
      field("cm", &OpWindowStats::comm, "op cm", Empty::kOmit),
      customField<metrics_codec::InComm<&OpWindowStats::comm_size>>("np", "op np"),
      customField<metrics_codec::InComm<&OpWindowStats::comm_rank>>("cr", "op cr"),
      field("peer", &OpWindowStats::peer, "op peer", Empty::kOmit),
      field("b", &OpWindowStats::bytes, "op b", Empty::kOmit),
      field("cnt", &OpWindowStats::count, "op cnt"),
      field("ns", &OpWindowStats::total_ns, "op ns"),
      customField<metrics_codec::WholeNs<&OpWindowStats::p50_ns>>("p50", "p50"),
      customField<metrics_codec::WholeNs<&OpWindowStats::p99_ns>>("p99", "p99"),
      field("max", &OpWindowStats::max_ns, "op max"),
      field("h", &OpWindowStats::durations, "h"),
      customField<metrics_codec::Rate<&OpWindowStats::tflops>>("tf", "op tf"),
      customField<metrics_codec::Rate<&OpWindowStats::algbw_gbps>>("alg", "op alg"),
      customField<metrics_codec::Rate<&OpWindowStats::busbw_gbps>>("bus", "op bus"),
  };
};

template <>
struct Schema<StreamBusy> {
  static constexpr const char* what = "st entry";
  static constexpr auto fields = std::tuple{
      field("s", &StreamBusy::stream, "st s"),
      field("busy", &StreamBusy::busy_ns, "st busy"),
  };
};

template <>
struct Schema<StepStats> {
  static constexpr const char* what = "step";
  static constexpr auto fields = std::tuple{
      field("src", &StepStats::source, "step src"),
      field("key", &StepStats::anchor, "step key", Empty::kOmit),
      field("cnt", &StepStats::count, "step cnt"),
      field("ns", &StepStats::total_ns, "step ns"),
      customField<metrics_codec::WholeNs<&StepStats::p50_ns>>("p50", "step p50"),
      field("max", &StepStats::max_ns, "step max"),
  };
};

template <>
struct Schema<LinkWindowStats> {
  static constexpr const char* what = "lk entry";
  static constexpr auto fields = std::tuple{
      field("nc", &LinkWindowStats::comm, "lk nc"),
      field("np", &LinkWindowStats::comm_size, "lk np"),
      field("cr", &LinkWindowStats::comm_rank, "lk cr"),
      field("peer", &LinkWindowStats::peer, "lk peer"),
      field("b", &LinkWindowStats::bytes, "lk b"),
      field("cnt", &LinkWindowStats::steps, "lk cnt"),
      field("ns", &LinkWindowStats::busy_ns, "lk ns"),
  };
};

template <>
struct Schema<metrics_codec::CountAndNs> {
  static constexpr const char* what = "count";
  static constexpr auto fields = std::tuple{
      field("cnt", &metrics_codec::CountAndNs::count, "cnt"),
      field("ns", &metrics_codec::CountAndNs::ns, "ns"),
  };
};

template <>
struct Schema<metrics_codec::SyncTotals> {
  static constexpr const char* what = "sync";
  static constexpr auto fields = std::tuple{
      field("cnt", &metrics_codec::SyncTotals::count, "sync cnt"),
      field("ns", &metrics_codec::SyncTotals::ns, "sync ns"),
      field("by", &metrics_codec::SyncTotals::by, "sync.by"),
  };
};

template <>
struct Schema<MetricsWindow> {
  static constexpr const char* what = "metrics window";
  static constexpr auto fields = std::tuple_cat(windowIdentityFields<MetricsWindow>(), std::tuple{
      customField<metrics_codec::Millis<&MetricsWindow::start_unix_s>>("t0", "t0"),
      customField<metrics_codec::Millis<&MetricsWindow::end_unix_s>>("t1", "t1"),
      field("m0", &MetricsWindow::start_mono_ns, "m0"),
      field("m1", &MetricsWindow::end_mono_ns, "m1"),
      field("ops", &MetricsWindow::ops, "ops"),
      customField<metrics_codec::OtherOps>("oth", "oth"),
      field("il", &MetricsWindow::issue_latency, "il"),
      field("busy", &MetricsWindow::busy_ns, "busy"),
      field("void", &MetricsWindow::void_ns, "void"),
      field("vstep", &MetricsWindow::inter_step_void_ns, "vstep"),
      field("st", &MetricsWindow::streams, "st"),
      customField<metrics_codec::Syncs>("sync", "sync"),
      field("step", &MetricsWindow::step, "step"),
      field("drop", &MetricsWindow::dropped, "drop"),
      field("lk", &MetricsWindow::links, "lk", Empty::kOmit),
  });
};

}  // namespace hangwatch::schema
