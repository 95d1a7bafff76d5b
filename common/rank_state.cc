#include "hangwatch/common/rank_state.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

namespace hangwatch {

using json_fields::getOr;

const char* dumpPhaseName(DumpPhase p) { return p == DumpPhase::kDone ? "done" : "collecting"; }

nlohmann::json toJson(const RankState& s) {
  return {{"schema_version", s.schema_version}, {"rank", s.rank},        {"state", dumpPhaseName(s.phase)},
          {"pid", s.pid},                       {"host", s.host},        {"time_unix_s", s.time_unix_s},
          {"deadline_unix_s", s.deadline_unix_s}, {"collector_pid", s.collector_pid},
          {"snapshot", s.snapshot},             {"forensics", s.forensics}, {"note", s.note}};
}

Expected<RankState> rankStateFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    RankState s;
    s.schema_version = getOr(j, "schema_version", 1);
    s.rank = getOr(j, "rank", -1);
    std::string phase = getOr<std::string>(j, "state", "");
    if (phase == "done") s.phase = DumpPhase::kDone;
    else if (phase == "collecting") s.phase = DumpPhase::kCollecting;
    else throw std::runtime_error("unknown state '" + phase + "'");
    s.pid = getOr<int64_t>(j, "pid", 0);
    s.host = getOr<std::string>(j, "host", "");
    s.time_unix_s = getOr(j, "time_unix_s", 0.0);
    s.deadline_unix_s = getOr(j, "deadline_unix_s", 0.0);
    s.collector_pid = getOr<int64_t>(j, "collector_pid", 0);
    s.snapshot = getOr<std::string>(j, "snapshot", "");
    s.forensics = getOr<std::string>(j, "forensics", "");
    s.note = getOr<std::string>(j, "note", "");
    return s;
  } catch (const std::exception& e) {
    return Error{std::string("rank state: ") + e.what()};
  }
}

Expected<RankState> rankStateFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"rank state: truncated or corrupt JSON"};
  return rankStateFromJson(j);
}

Expected<RankState> readRankState(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"no file"};
  std::stringstream text;
  text << in.rdbuf();
  return rankStateFromText(text.str());
}

}  // namespace hangwatch
