#include "hangwatch/common/watchdog_snapshot.h"

#include <exception>
#include <functional>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

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

constexpr std::array<const char*, kSnapshotProxyStages> kSendStages = {"posted", "filled", "sent", "done"};
constexpr std::array<const char*, kSnapshotProxyStages> kRecvStages = {"posted", "arrived", "delivered", "done"};

json toJson(const SnapshotProgress& p) {
  json connections = json::array();
  for (const SnapshotProxyConnection& c : p.connections) {
    json steps = json::object(), moved = json::object();
    const auto& names = proxyStageNames(c.dir);
    for (int i = 0; i < kSnapshotProxyStages; ++i) {
      steps[names[i]] = c.steps[i];
      moved[names[i]] = optionalJson(c.moved_s_ago[i]);
    }
    connections.push_back({{"nccl_comm", c.nccl_comm}, {"rank", c.rank},       {"nranks", c.nranks},
                           {"channel", c.channel},     {"peer", c.peer},       {"dir", c.dir},
                           {"ops", c.ops},             {"ops_done", c.ops_done}, {"untracked_ops", c.untracked_ops},
                           {"steps", steps},           {"moved_s_ago", moved}});
  }
  json channels = json::array();
  for (const SnapshotKernelChannel& k : p.kernel_channels)
    channels.push_back({{"nccl_comm", k.nccl_comm},
                        {"channel", k.channel},
                        {"started", k.started},
                        {"stopped", k.stopped},
                        {"started_s_ago", optionalJson(k.started_s_ago)},
                        {"stopped_s_ago", optionalJson(k.stopped_s_ago)}});
  return {{"plugin_inits", p.plugin_inits},
          {"connections", connections},
          {"kernel_channels", channels},
          {"dropped_connections", p.dropped_connections},
          {"dropped_kernel_channels", p.dropped_kernel_channels}};
}

// Stages by name; a name of the other direction is an error only in that it is ignored.
void stagesFromJson(const json& j, const char* key, const std::function<void(int, const json&)>& each) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_object()) throw std::runtime_error(std::string(key) + " is not an object");
  for (auto [name, value] : it->items())
    if (int stage = proxyStageIndex(name); stage >= 0) each(stage, value);
}

SnapshotProgress progressFromJson(const json& j) {
  if (!j.is_object()) throw std::runtime_error("progress is not an object");
  SnapshotProgress p;
  p.plugin_inits = getOr<uint64_t>(j, "plugin_inits", 0);
  p.dropped_connections = getOr<uint64_t>(j, "dropped_connections", 0);
  p.dropped_kernel_channels = getOr<uint64_t>(j, "dropped_kernel_channels", 0);
  for (const json& c : arrayOrEmpty(j, "connections")) {
    if (!c.is_object()) throw std::runtime_error("progress connection is not an object");
    SnapshotProxyConnection pc;
    pc.nccl_comm = getOr<std::string>(c, "nccl_comm", "");
    pc.rank = getOr(c, "rank", -1);
    pc.nranks = getOr(c, "nranks", 0);
    pc.channel = getOr(c, "channel", 0);
    pc.peer = getOr(c, "peer", -1);
    pc.dir = getOr<std::string>(c, "dir", "");
    pc.ops = getOr<uint64_t>(c, "ops", 0);
    pc.ops_done = getOr<uint64_t>(c, "ops_done", 0);
    pc.untracked_ops = getOr<uint64_t>(c, "untracked_ops", 0);
    stagesFromJson(c, "steps", [&](int i, const json& v) {
      if (!v.is_null()) pc.steps[i] = json_fields::checkedGet<uint64_t>(v, "steps");
    });
    stagesFromJson(c, "moved_s_ago", [&](int i, const json& v) {
      if (!v.is_null()) pc.moved_s_ago[i] = json_fields::checkedGet<double>(v, "moved_s_ago");
    });
    p.connections.push_back(std::move(pc));
  }
  for (const json& k : arrayOrEmpty(j, "kernel_channels")) {
    if (!k.is_object()) throw std::runtime_error("kernel channel is not an object");
    SnapshotKernelChannel kc;
    kc.nccl_comm = getOr<std::string>(k, "nccl_comm", "");
    kc.channel = getOr(k, "channel", 0);
    kc.started = getOr<uint64_t>(k, "started", 0);
    kc.stopped = getOr<uint64_t>(k, "stopped", 0);
    kc.started_s_ago = getOptional<double>(k, "started_s_ago");
    kc.stopped_s_ago = getOptional<double>(k, "stopped_s_ago");
    p.kernel_channels.push_back(std::move(kc));
  }
  return p;
}

}  // namespace

const std::array<const char*, kSnapshotProxyStages>& proxyStageNames(const std::string& dir) {
  return dir == "send" ? kSendStages : kRecvStages;
}

int proxyStageIndex(std::string_view name) {
  for (int i = 0; i < kSnapshotProxyStages; ++i)
    if (name == kSendStages[i] || name == kRecvStages[i]) return i;
  return -1;
}

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
                     {"last_completed_seq", optionalJson(c.last_completed_seq)},
                     {"nccl_id", c.nccl_id.empty() ? json(nullptr) : json(c.nccl_id)},
                     {"address", c.address}});
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
  j["progress"] = s.progress ? toJson(*s.progress) : json(nullptr);
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
      comm.nccl_id = getOr<std::string>(c, "nccl_id", "");
      comm.address = getOr<std::string>(c, "address", "");
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
    if (auto it = j.find("progress"); it != j.end() && !it->is_null()) s.progress = progressFromJson(*it);
    return s;
  } catch (const std::exception& e) {
    return Error{std::string("watchdog snapshot: ") + e.what()};
  }
}

}  // namespace hangwatch
