#include "hangwatch/common/forensics_dump.h"

#include "hangwatch/common/schema/json_codec.h"

namespace hangwatch {

nlohmann::json toJson(const RingProgress& r) { return schema::toJson(r); }

Expected<RingProgress> ringProgressFromJson(const nlohmann::json& j) { return schema::fromJson<RingProgress>(j); }

nlohmann::json toJson(const ForensicsDump& d) { return schema::toJson(d); }

nlohmann::json toJson(const RasAnswer& a) { return schema::toJson(a); }

Expected<RasAnswer> rasAnswerFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"ras answer: not valid JSON (truncated or corrupt)"};
  return schema::fromJson<RasAnswer>(j);
}

Expected<ForensicsDump> forensicsDumpFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"forensics dump: not valid JSON (truncated or corrupt)"};
  return schema::fromJson<ForensicsDump>(j);
}

}  // namespace hangwatch
