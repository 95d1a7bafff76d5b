#include "hangwatch/common/rank_state.h"

#include <stdexcept>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/schema/json_codec.h"

namespace hangwatch {
namespace {

constexpr size_t kMaxStateBytes = 4 << 20;

}  // namespace

const char* dumpPhaseName(DumpPhase p) { return schema::enumName(p).data(); }

nlohmann::json toJson(const RankState& s) { return schema::toJson(s); }

Expected<RankState> rankStateFromJson(const nlohmann::json& j) {
  // The phase is what a reader waits on: a state without one is not a state.
  if (j.is_object() && !j.contains(schema::keyOf(&RankState::phase))) return Error{"rank state: no state"};
  return schema::fromJson<RankState>(j);
}

Expected<RankState> rankStateFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"rank state: truncated or corrupt JSON"};
  return rankStateFromJson(j);
}

Expected<RankState> readRankState(const std::string& path) {
  Expected<std::string> text = dumpFs().read(path, kMaxStateBytes, /*create=*/false, 0);
  if (!text) return Error{"no file"};
  return rankStateFromText(*text);
}

}  // namespace hangwatch
