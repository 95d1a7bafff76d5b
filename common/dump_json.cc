// The trigger record's and a stack's JSON, through their field lists.
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/common/trigger_record.h"

#include <fstream>
#include <sstream>

namespace hangwatch {

nlohmann::json toJson(const TriggerRecord& t) { return schema::toJson(t); }

Expected<TriggerRecord> triggerFromJson(const nlohmann::json& j) { return schema::fromJson<TriggerRecord>(j); }

Expected<TriggerRecord> readTriggerFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": no such file"};
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{path + " is truncated or corrupt"};
  Expected<TriggerRecord> t = triggerFromJson(j);
  if (!t) return Error{path + " is unreadable: " + t.error()};
  return t;
}

const char* frameKindName(FrameKind k) { return schema::enumName(k).data(); }

nlohmann::json toJson(const StackFrame& f) { return schema::toJson(f); }

nlohmann::json toJson(const ThreadStack& t) { return schema::toJson(t); }

}  // namespace hangwatch
