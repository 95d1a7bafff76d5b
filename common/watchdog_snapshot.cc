#include "hangwatch/watchdog_snapshot.h"

#include <exception>
#include <stdexcept>

#include "hangwatch/json_fields.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::arrayOrEmpty;
using json_fields::getOptional;
using json_fields::getOr;
using json_fields::optionalJson;





json toJson(const SnapshotPendingOp& p) {
  return {{"op", p.op},       {"class", p.op_class},       {"comm", p.comm},
          {"seq", optionalJson(p.seq)}, {"bytes", p.bytes}, {"dtype", p.dtype},
          {"count", p.count}, {"peer", optionalJson(p.peer)}, {"age_s", p.age_s},
          {"issued_s_ago", p.issued_s_ago}, {"gpu_started", p.gpu_started}};
}

SnapshotPendingOp pendingFromJson(const json& j) {
  SnapshotPendingOp p;
  p.op = getOr<std::string>(j, "op", "");
  p.op_class = getOr<std::string>(j, "class", "");
  p.comm = getOr<std::string>(j, "comm", "");
  p.seq = getOptional<uint64_t>(j, "seq");
  p.bytes = getOr<uint64_t>(j, "bytes", 0);
  p.dtype = getOr<std::string>(j, "dtype", "");
  p.count = getOr<uint64_t>(j, "count", 0);
  p.peer = getOptional<int>(j, "peer");
  p.age_s = getOr(j, "age_s", 0.0);
  p.issued_s_ago = getOr(j, "issued_s_ago", 0.0);
  p.gpu_started = getOr(j, "gpu_started", false);
  return p;
}

}  // namespace

nlohmann::json toJson(const WatchdogSnapshot& s) {
  const SnapshotIdentity& id = s.identity;
  json j = {{"schema_version", s.schema_version}, {"time_unix_s", s.time_unix_s}, {"timeout_s", s.timeout_s},
            {"detected_here", s.detected_here}};
  j["identity"] = {{"rank", optionalJson(id.rank)},
                   {"local_rank", optionalJson(id.local_rank)},
                   {"world_size", optionalJson(id.world_size)},
                   {"rank_source", id.rank_source},
                   {"host", id.host},
                   {"pid", id.pid},
                   {"job_id", id.job_id},
                   {"device", optionalJson(id.device)},
                   {"cuda_visible_devices", id.cuda_visible_devices}};
  j["trigger"] = s.trigger ? toJson(*s.trigger) : json(nullptr);
  json comms = json::array();
  for (const SnapshotComm& c : s.comms)
    comms.push_back({{"hash", c.hash},
                     {"rank", c.rank},
                     {"size", c.size},
                     {"device", c.device},
                     {"state", c.state},
                     {"last_issued_seq", optionalJson(c.last_issued_seq)},
                     {"last_completed_seq", optionalJson(c.last_completed_seq)}});
  j["comms"] = comms;
  json streams = json::array();
  for (const SnapshotStream& st : s.streams) {
    json pending = json::array();
    for (const SnapshotPendingOp& p : st.pending) pending.push_back(toJson(p));
    streams.push_back({{"stream", st.stream}, {"device", optionalJson(st.device)}, {"pending", pending}});
  }
  j["streams"] = streams;
  json calls = json::array();
  for (const SnapshotHostCall& h : s.host_calls)
    calls.push_back({{"call", h.call},
                     {"tid", h.tid},
                     {"thread_name", h.thread_name},
                     {"age_s", h.age_s},
                     {"comm", h.comm},
                     {"seq", optionalJson(h.seq)}});
  j["host_calls"] = calls;
  j["health"] = {{"failures_logged", s.health.failures_logged},
                 {"ops_timed", s.health.ops_timed},
                 {"ops_completed", s.health.ops_completed},
                 {"events_exhausted", s.health.events_exhausted},
                 {"ops_dropped", s.health.ops_dropped}};
  return j;
}

Expected<WatchdogSnapshot> watchdogSnapshotFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    WatchdogSnapshot s;
    s.schema_version = getOr(j, "schema_version", 1);
    s.time_unix_s = getOr(j, "time_unix_s", 0.0);
    s.timeout_s = getOr(j, "timeout_s", 0.0);
    s.detected_here = getOr(j, "detected_here", false);
    if (auto it = j.find("identity"); it != j.end() && it->is_object()) {
      SnapshotIdentity& id = s.identity;
      id.rank = getOptional<int>(*it, "rank");
      id.local_rank = getOptional<int>(*it, "local_rank");
      id.world_size = getOptional<int>(*it, "world_size");
      id.rank_source = getOr<std::string>(*it, "rank_source", "");
      id.host = getOr<std::string>(*it, "host", "");
      id.pid = getOr<int64_t>(*it, "pid", 0);
      id.job_id = getOr<std::string>(*it, "job_id", "");
      id.device = getOptional<int>(*it, "device");
      id.cuda_visible_devices = getOr<std::string>(*it, "cuda_visible_devices", "");
    }
    if (auto it = j.find("trigger"); it != j.end() && it->is_object()) {
      auto t = triggerFromJson(*it);
      if (!t) return Error{"watchdog snapshot: " + t.error()};
      s.trigger = *t;
    }
    for (const json& c : arrayOrEmpty(j, "comms")) {
      SnapshotComm comm;
      comm.hash = getOr<std::string>(c, "hash", "");
      comm.rank = getOr(c, "rank", -1);
      comm.size = getOr(c, "size", 0);
      comm.device = getOr(c, "device", -1);
      comm.state = getOr<std::string>(c, "state", "");
      comm.last_issued_seq = getOptional<uint64_t>(c, "last_issued_seq");
      comm.last_completed_seq = getOptional<uint64_t>(c, "last_completed_seq");
      s.comms.push_back(comm);
    }
    for (const json& st : arrayOrEmpty(j, "streams")) {
      SnapshotStream stream;
      stream.stream = getOr<std::string>(st, "stream", "");
      stream.device = getOptional<int>(st, "device");
      for (const json& p : arrayOrEmpty(st, "pending")) stream.pending.push_back(pendingFromJson(p));
      s.streams.push_back(std::move(stream));
    }
    for (const json& h : arrayOrEmpty(j, "host_calls")) {
      SnapshotHostCall call;
      call.call = getOr<std::string>(h, "call", "");
      call.tid = getOr<int64_t>(h, "tid", 0);
      call.thread_name = getOr<std::string>(h, "thread_name", "");
      call.age_s = getOr(h, "age_s", 0.0);
      call.comm = getOr<std::string>(h, "comm", "");
      call.seq = getOptional<uint64_t>(h, "seq");
      s.host_calls.push_back(call);
    }
    if (auto it = j.find("health"); it != j.end() && it->is_object()) {
      s.health.failures_logged = getOr<uint64_t>(*it, "failures_logged", 0);
      s.health.ops_timed = getOr<uint64_t>(*it, "ops_timed", 0);
      s.health.ops_completed = getOr<uint64_t>(*it, "ops_completed", 0);
      s.health.events_exhausted = getOr<uint64_t>(*it, "events_exhausted", 0);
      s.health.ops_dropped = getOr<uint64_t>(*it, "ops_dropped", 0);
    }
    return s;
  } catch (const std::exception& e) {
    return Error{std::string("watchdog snapshot: ") + e.what()};
  }
}

}  // namespace hangwatch
