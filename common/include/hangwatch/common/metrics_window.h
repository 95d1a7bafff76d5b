#pragma once
// One rolling metrics window: one line of metrics/rNNNNN.jsonl (DESIGN.md §4). The
// watchdog writes it every HANGWATCH_METRICS_INTERVAL; the analyzer reads it back.
// Short JSON keys keep a window at a few hundred bytes per step; the key of each field
// is named in its comment. Durations are integer ns, bandwidths GB/s (1e9 B/s).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/log_histogram.h"

namespace hangwatch {

// Aggregate of one op key. Keys: collectives by (name, comm, bytes), p2p by (name,
// comm, peer, bytes), GEMMs by (name, shape), memcpys by (name, bytes), kernels by name.
struct OpWindowStats {
  std::string cls;                   // "c": coll | p2p | gemm | kernel | memcpy
  std::string name;                  // "n": API or kernel name
  std::string shape;                 // "sh": GEMM "MxNxK", "MxNxKxB" when batched
  std::string comm;                  // "cm": communicator hash as hex
  int comm_size = 0;                 // "np"
  std::optional<int> comm_rank;      // "cr": this rank in the communicator, names ring links
  std::optional<int> peer;           // "peer": p2p only
  uint64_t bytes = 0;                // "b": the API's count*sizeof(dtype)
  uint64_t count = 0;                // "cnt"
  int64_t total_ns = 0;              // "ns": sum of GPU durations
  double p50_ns = 0;                 // "p50", "p99": from `durations`, within one bucket
  double p99_ns = 0;
  int64_t max_ns = 0;                // "max"
  LogHistogram durations;            // "h"
  std::optional<double> tflops;      // "tf": GEMMs, total flops / total time (4 digits, as alg/bus)
  std::optional<double> algbw_gbps;  // "alg": nccl-tests size / mean time (memcpy: bytes / mean time)
  std::optional<double> busbw_gbps;  // "bus": algbw * nccl-tests factor
};

struct StreamBusy {
  std::string stream;  // "s": stream handle as hex
  int64_t busy_ns = 0; // "busy"
};

struct HostSyncStats {
  std::string call;    // key of "sync.by"
  uint64_t count = 0;
  int64_t total_ns = 0;
};

// Step time. "marker": the watchdog was told where steps end; "anchor": steps are the
// periods between successive completions of one collective key (`anchor`) on the
// largest communicator, which is a sub-step period if that key runs several times a step.
struct StepStats {
  std::string source;     // "src"
  std::string anchor;     // "key"
  uint64_t count = 0;     // "cnt": completed steps in the window
  int64_t total_ns = 0;   // "ns"
  double p50_ns = 0;      // "p50"
  int64_t max_ns = 0;     // "max"
};

// One connection this rank sends on over the network, from NCCL's profiler plugin
// (proxy steps): `busy_ns` is the union of its steps' [handed to the network, done]
// intervals, so bytes / busy is what the link achieved while it had data to move.
struct LinkWindowStats {
  std::string comm;     // "nc": NCCL's communicator id as hex, the same on every member
  int comm_size = 0;    // "np"
  int comm_rank = 0;    // "cr": this rank in the communicator
  int peer = 0;         // "peer": the receiver's rank in the communicator
  uint64_t bytes = 0;   // "b"
  uint64_t steps = 0;   // "cnt"
  int64_t busy_ns = 0;  // "ns"
};

struct MetricsWindow {
  int schema_version = 1;          // "v"
  int rank = -1;                   // "rank"
  std::string host;                // "host"
  int64_t pid = 0;                 // "pid"
  double start_unix_s = 0;         // "t0", "t1": wall clock, to the ms
  double end_unix_s = 0;
  int64_t start_mono_ns = 0;       // "m0", "m1": CLOCK_MONOTONIC, the clock of every op time
  int64_t end_mono_ns = 0;
  std::vector<OpWindowStats> ops;  // "ops"
  uint64_t other_count = 0;        // "oth": {"cnt","ns"}: ops whose key did not fit the key cap
  int64_t other_ns = 0;
  // "il": issue latency (GPU start - host issue, negatives as 0) per op class.
  std::map<std::string, LogHistogram> issue_latency;
  // GPU busy time is the length of the union of all timed ops' [gpu start, gpu end]
  // intervals (every stream) clipped to the window; void = window length - busy.
  int64_t busy_ns = 0;             // "busy"
  int64_t void_ns = 0;             // "void"
  // "vstep": the longest idle gap of each step, summed (inter-step void: dataloader,
  // host stalls); void - vstep is idle between kernels inside steps. Null without steps.
  std::optional<int64_t> inter_step_void_ns;
  std::vector<StreamBusy> streams; // "st": per-stream busy time (one stream serialises its ops)
  uint64_t sync_count = 0;         // "sync": {"cnt","ns","by":{call:[cnt,ns]}}
  int64_t sync_ns = 0;
  std::vector<HostSyncStats> syncs;
  std::optional<StepStats> step;   // "step": null when not known
  std::vector<LinkWindowStats> links;  // "lk": absent when NCCL reported no proxy steps
  uint64_t dropped = 0;            // "drop": ops the watchdog could not time or keep
};

nlohmann::json toJson(const MetricsWindow& w);
// Tolerant reader: missing fields keep their defaults, unknown fields are ignored;
// a wrong type is an error naming the window.
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
