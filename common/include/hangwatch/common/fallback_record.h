#pragma once
// FALLBACK.json: left in a node-local fallback folder ($HANGWATCH_FALLBACK_DIR/<job-id>/) by
// a rank that gave its dump folder up (full, read-only, gone or stalled; watchdog/dump_storage.h),
// so that whoever finds the folder knows whose dumps these are and where the rest went.
// Rewritten by each rank that falls back: the newest says why it did.
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

struct FallbackRecord {
  int schema_version = 1;
  std::string primary;   // the job folder on shared storage that was given up
  std::string host;
  int64_t pid = 0;
  std::string why;       // "stalled: writing ... took more than 10 s", or the error
  double time_unix_s = 0;
};

std::string fallbackRecordPath(const std::string& fallback_job_dir);
nlohmann::json toJson(const FallbackRecord& r);
Expected<FallbackRecord> fallbackRecordFromJson(const nlohmann::json& j);
// An error when missing, partial or unreadable.
Expected<FallbackRecord> readFallbackRecord(const std::string& fallback_job_dir);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<FallbackRecord> {
  static constexpr const char* what = "fallback record";
  static constexpr auto fields = std::tuple{
      field("schema_version", &FallbackRecord::schema_version, "schema_version"),
      field("primary", &FallbackRecord::primary, "primary"),
      field("host", &FallbackRecord::host, "host"),
      field("pid", &FallbackRecord::pid, "pid"),
      field("why", &FallbackRecord::why, "why"),
      field("time_unix_s", &FallbackRecord::time_unix_s, "time_unix_s"),
  };
};

}  // namespace hangwatch::schema
