#include "hangwatch/common/fallback_record.h"

#include <fstream>
#include <sstream>

#include "hangwatch/common/schema/json_codec.h"

namespace hangwatch {

std::string fallbackRecordPath(const std::string& fallback_job_dir) { return fallback_job_dir + "/FALLBACK.json"; }

nlohmann::json toJson(const FallbackRecord& r) { return schema::toJson(r); }

Expected<FallbackRecord> fallbackRecordFromJson(const nlohmann::json& j) {
  if (j.is_object() && !j.contains("primary")) return Error{"fallback record: no primary folder"};
  return schema::fromJson<FallbackRecord>(j);
}

Expected<FallbackRecord> readFallbackRecord(const std::string& fallback_job_dir) {
  std::ifstream in(fallbackRecordPath(fallback_job_dir));
  if (!in) return Error{"no file"};
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"fallback record: truncated or corrupt JSON"};
  return fallbackRecordFromJson(j);
}

}  // namespace hangwatch
