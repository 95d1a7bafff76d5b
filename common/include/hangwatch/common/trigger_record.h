#pragma once
// TRIGGER.json (DESIGN.md §4): written once per job by the first detector (O_EXCL);
// every rank's watchdog watches for it and dumps when it appears.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"

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

}  // namespace hangwatch
