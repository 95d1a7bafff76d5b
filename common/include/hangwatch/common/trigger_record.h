#pragma once
// TRIGGER.json (DESIGN.md §4): written once per job by the first detector (O_EXCL);
// every rank's watchdog watches for it and dumps when it appears.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

// The operation that made the detector fire; absent for a manual trigger.
struct StuckOp {
  std::string op;           // "ncclAllReduce", "cublasGemmEx", "kernel:<name>", "ncclGroupEnd (host)"
  std::string comm;         // communicator hash as hex, empty when not a collective
  std::optional<uint64_t> seq;  // per-communicator collective sequence number
  uint64_t bytes = 0;
  std::optional<int> peer;
  std::string stream;       // stream handle as hex
  double age_s = 0;
};

struct TriggerRecord {
  int schema_version = 1;
  std::optional<int> rank;  // none for `forensics trigger` by hand
  std::string host;
  int64_t pid = 0;
  double time_unix_s = 0;   // wall clock of the detector's host
  std::string reason;       // "timeout", "host-call-timeout", "manual"
  std::optional<StuckOp> stuck_op;
};

nlohmann::json toJson(const TriggerRecord& t);
// Tolerant reader: a missing optional field stays unset; wrong types are an error.
Expected<TriggerRecord> triggerFromJson(const nlohmann::json& j);
// TRIGGER.json or SUSPECT.json as a file; an error says why it is missing or unreadable.
Expected<TriggerRecord> readTriggerFile(const std::string& path);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<StuckOp> {
  static constexpr const char* what = "stuck_op";
  static constexpr auto fields = std::tuple{
      field("op", &StuckOp::op, "stuck_op op"),
      field("comm", &StuckOp::comm, "stuck_op comm"),
      field("seq", &StuckOp::seq, "stuck_op seq"),
      field("bytes", &StuckOp::bytes, "stuck_op bytes"),
      field("peer", &StuckOp::peer, "stuck_op peer"),
      field("stream", &StuckOp::stream, "stuck_op stream"),
      field("age_s", &StuckOp::age_s, "stuck_op age_s"),
  };
};

template <>
struct Schema<TriggerRecord> {
  static constexpr const char* what = "TRIGGER.json";
  static constexpr auto fields = std::tuple{
      field("schema_version", &TriggerRecord::schema_version, "trigger schema_version"),
      field("rank", &TriggerRecord::rank, "trigger rank"),
      field("host", &TriggerRecord::host, "trigger host"),
      field("pid", &TriggerRecord::pid, "trigger pid"),
      field("time_unix_s", &TriggerRecord::time_unix_s, "trigger time_unix_s"),
      field("reason", &TriggerRecord::reason, "trigger reason"),
      field("stuck_op", &TriggerRecord::stuck_op, "stuck_op"),
  };
};

}  // namespace hangwatch::schema
