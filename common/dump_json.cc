// The trigger record's and a stack's JSON, through their field lists.
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch {

nlohmann::json toJson(const TriggerRecord& t) { return schema::toJson(t); }

Expected<TriggerRecord> triggerFromJson(const nlohmann::json& j) { return schema::fromJson<TriggerRecord>(j); }

const char* frameKindName(FrameKind k) { return schema::enumName(k).data(); }

nlohmann::json toJson(const StackFrame& f) { return schema::toJson(f); }

nlohmann::json toJson(const ThreadStack& t) { return schema::toJson(t); }

}  // namespace hangwatch
