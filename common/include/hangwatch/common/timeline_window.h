#pragma once
// The last ops of one rank, as the watchdog's bounded timeline ring held them when it
// last wrote timeline/rNNNNN.json (rewritten atomically at every metrics window).
// `forensics timeline` turns every rank's file into one Chrome trace; the slowdown
// analyzer lines collectives up across ranks by communicator and sequence number.
// Ops are arrays, not objects, and names/streams/communicators are tables: a file
// holds thousands of ops. Times are CLOCK_MONOTONIC ns relative to "base". The keys are
// listed once, in `Schema<TimelineWindow>` below; the rows and their tables are one
// codec (`timeline_codec::Rows`).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/schema/window_fields.h"

namespace hangwatch {

struct TimelineOp {
  std::string cls;         // coll | p2p | gemm | kernel | memcpy
  std::string name;        // API or kernel name
  std::string stream;      // stream handle as hex
  std::string comm;        // communicator hash as hex, "" when not communication
  int comm_rank = -1;      // ring position in `comm`, -1 when unknown
  int comm_size = 0;
  int peer = -1;           // p2p peer
  uint64_t seq = 0;        // coll: per-communicator sequence number; p2p: the k-th send to (receive
                           // from) `peer`, from 1 (0: not counted, or a file from before 2026-11-29)
  uint64_t bytes = 0;      // count*sizeof(dtype)
  double flops = 0;        // GEMMs
  std::string shape;       // GEMMs: "MxNxK", "MxNxKxB" when batched (as the metrics key them)
  int64_t issue_ns = 0;    // host issue (absolute CLOCK_MONOTONIC ns once read)
  int64_t start_ns = 0;    // GPU start
  int64_t end_ns = 0;      // GPU end
};

struct TimelineSync {
  std::string call;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct TimelineWindow {
  int schema_version = 1;
  int rank = -1;
  std::string host;
  int64_t pid = 0;
  std::optional<int> device;  // the CUDA device it ran on, once the watchdog knew it
  // One (monotonic, wall) clock pair taken together: maps ops onto wall time across hosts.
  int64_t clock_mono_ns = 0;
  double clock_unix_s = 0;
  uint64_t overwritten = 0;      // ops the ring overwrote since the process started
  std::vector<TimelineOp> ops;   // oldest first
  std::vector<TimelineSync> syncs;
};

nlohmann::json toJson(const TimelineWindow& w);
// Tolerant like the other readers (schema/json_codec.h): missing fields keep defaults;
// malformed input is an error.
Expected<TimelineWindow> timelineWindowFromJson(const nlohmann::json& j);
Expected<TimelineWindow> readTimelineFile(const std::string& path);

// Wall-clock microseconds of a monotonic time on this window's host (Chrome trace "ts").
double timelineUnixUs(const TimelineWindow& w, int64_t mono_ns);

}  // namespace hangwatch

namespace hangwatch::timeline_codec {

// "base", the tables "names", "streams" and "comms", "ops" (one array per op, its
// columns in `OpColumn` order) and "syncs" ([name, start, end]).
struct Rows {
  using Struct = TimelineWindow;
  static void write(nlohmann::json& object, const TimelineWindow& w);
  static void read(const nlohmann::json& object, TimelineWindow& w, const char* what);
};

}  // namespace hangwatch::timeline_codec

namespace hangwatch::schema {

template <>
struct Schema<TimelineWindow> {
  static constexpr const char* what = "timeline";
  static constexpr auto fields = std::tuple_cat(windowIdentityFields<TimelineWindow>(), std::tuple{
      field("cm", &TimelineWindow::clock_mono_ns, "cm"),
      field("cu", &TimelineWindow::clock_unix_s, "cu"),
      field("lost", &TimelineWindow::overwritten, "lost"),
      inlineField<timeline_codec::Rows>("ops"),
  });
};

}  // namespace hangwatch::schema
