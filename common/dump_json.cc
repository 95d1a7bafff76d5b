// The trigger record's and a stack's JSON, through their field lists.
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/common/trigger_record.h"

#include "hangwatch/common/dump_fs.h"

namespace hangwatch {

nlohmann::json toJson(const TriggerRecord& t) { return schema::toJson(t); }

Expected<TriggerRecord> triggerFromJson(const nlohmann::json& j) { return schema::fromJson<TriggerRecord>(j); }

Expected<TriggerRecord> readTriggerFile(const std::string& path) {
  // Through the calling thread's file system (dump_fs.h): the watchdog reads it on shared storage.
  Expected<std::string> text = dumpFs().read(path, 4 << 20, /*create=*/false, 0);
  if (!text) return Error{path + ": no such file"};
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{path + " is truncated or corrupt"};
  Expected<TriggerRecord> t = triggerFromJson(j);
  if (!t) return Error{path + " is unreadable: " + t.error()};
  return t;
}

const char* frameKindName(FrameKind k) { return schema::enumName(k).data(); }

nlohmann::json toJson(const StackFrame& f) { return schema::toJson(f); }

nlohmann::json toJson(const ThreadStack& t) { return schema::toJson(t); }

}  // namespace hangwatch
