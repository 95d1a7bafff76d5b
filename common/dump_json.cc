#include <exception>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::getOptional;
using json_fields::getOr;
using json_fields::putOptional;


template <typename T, typename F>
Expected<T> guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Error{std::string(what) + ": " + e.what()};
  }
}

}  // namespace

nlohmann::json toJson(const TriggerRecord& t) {
  json j = {{"schema_version", t.schema_version}, {"host", t.host}, {"pid", t.pid},
            {"time_unix_s", t.time_unix_s}, {"reason", t.reason}};
  j["rank"] = t.rank ? json(*t.rank) : json(nullptr);
  if (t.stuck_op) {
    const StuckOp& s = *t.stuck_op;
    json op = {{"op", s.op}, {"comm", s.comm}, {"bytes", s.bytes}, {"stream", s.stream}, {"age_s", s.age_s}};
    op["seq"] = s.seq ? json(*s.seq) : json(nullptr);
    op["peer"] = s.peer ? json(*s.peer) : json(nullptr);
    j["stuck_op"] = op;
  } else {
    j["stuck_op"] = nullptr;
  }
  return j;
}

Expected<TriggerRecord> triggerFromJson(const nlohmann::json& j) {
  return guarded<TriggerRecord>("TRIGGER.json", [&] {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    TriggerRecord t;
    t.schema_version = getOr(j, "schema_version", 1);
    t.rank = getOptional<int>(j, "rank");
    t.host = getOr<std::string>(j, "host", "");
    t.pid = getOr<int64_t>(j, "pid", 0);
    t.time_unix_s = getOr(j, "time_unix_s", 0.0);
    t.reason = getOr<std::string>(j, "reason", "");
    auto it = j.find("stuck_op");
    if (it != j.end() && it->is_object()) {
      StuckOp s;
      s.op = getOr<std::string>(*it, "op", "");
      s.comm = getOr<std::string>(*it, "comm", "");
      s.seq = getOptional<uint64_t>(*it, "seq");
      s.bytes = getOr<uint64_t>(*it, "bytes", 0);
      s.peer = getOptional<int>(*it, "peer");
      s.stream = getOr<std::string>(*it, "stream", "");
      s.age_s = getOr(*it, "age_s", 0.0);
      t.stuck_op = s;
    }
    return t;
  });
}

const char* frameKindName(FrameKind k) { return k == FrameKind::kPython ? "python" : "native"; }

nlohmann::json toJson(const StackFrame& f) {
  json j = {{"kind", frameKindName(f.kind)}, {"function", f.function}};
  if (!f.file.empty()) j["file"] = f.file;
  putOptional(j, "line", f.line);
  if (!f.module.empty()) j["module"] = f.module;
  putOptional(j, "pc", f.pc);
  putOptional(j, "offset", f.offset);
  return j;
}

Expected<StackFrame> stackFrameFromJson(const nlohmann::json& j) {
  return guarded<StackFrame>("frame", [&] {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    StackFrame f;
    std::string kind = getOr<std::string>(j, "kind", "native");
    if (kind != "native" && kind != "python") throw std::runtime_error("unknown frame kind '" + kind + "'");
    f.kind = kind == "python" ? FrameKind::kPython : FrameKind::kNative;
    f.function = getOr<std::string>(j, "function", "??");
    f.file = getOr<std::string>(j, "file", "");
    f.line = getOptional<int>(j, "line");
    f.module = getOr<std::string>(j, "module", "");
    f.pc = getOptional<uint64_t>(j, "pc");
    f.offset = getOptional<uint64_t>(j, "offset");
    return f;
  });
}

namespace {

json framesToJson(const std::vector<StackFrame>& frames) {
  json a = json::array();
  for (const StackFrame& f : frames) a.push_back(toJson(f));
  return a;
}

std::vector<StackFrame> framesFromJson(const json& j, const char* key) {
  std::vector<StackFrame> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " is not an array");
  for (const json& f : *it) {
    Expected<StackFrame> frame = stackFrameFromJson(f);
    if (!frame) throw std::runtime_error(frame.error());
    out.push_back(std::move(*frame));
  }
  return out;
}

}  // namespace

nlohmann::json toJson(const ThreadStack& t) {
  json j = {{"tid", t.tid}, {"name", t.name}, {"os_name", t.os_name}, {"state", t.state},
            {"frames", framesToJson(t.frames)}};
  if (!t.wchan.empty()) j["wchan"] = t.wchan;
  if (!t.native_frames.empty()) j["native_frames"] = framesToJson(t.native_frames);
  if (!t.python_frames.empty()) j["python_frames"] = framesToJson(t.python_frames);
  if (!t.merge_note.empty()) j["merge_note"] = t.merge_note;
  return j;
}

Expected<ThreadStack> threadStackFromJson(const nlohmann::json& j) {
  return guarded<ThreadStack>("thread", [&] {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    ThreadStack t;
    t.tid = getOr<int64_t>(j, "tid", 0);
    t.name = getOr<std::string>(j, "name", "");
    t.os_name = getOr<std::string>(j, "os_name", "");
    t.state = getOr<std::string>(j, "state", "");
    t.wchan = getOr<std::string>(j, "wchan", "");
    t.frames = framesFromJson(j, "frames");
    t.native_frames = framesFromJson(j, "native_frames");
    t.python_frames = framesFromJson(j, "python_frames");
    t.merge_note = getOr<std::string>(j, "merge_note", "");
    return t;
  });
}

}  // namespace hangwatch
