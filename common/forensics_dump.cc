#include "hangwatch/common/forensics_dump.h"

#include <exception>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::getOptional;
using json_fields::getOr;
using json_fields::optionalJson;

// Iterates an optional array field; a present non-array is an error.
template <typename F>
void forEachIn(const json& j, const char* key, F&& f) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " is not an array");
  for (const json& e : *it) f(e);
}

// A rank, peer or channel the reader could not tell is -1 in memory and null on disk.
json rankJson(int v) { return v >= 0 ? json(v) : json(nullptr); }

int rankOr(const json& j, const char* key) {
  std::optional<int> v = getOptional<int>(j, key);
  return v && *v >= 0 ? *v : -1;
}

json toJson(const RingProxyProgress& p) {
  return {{"base", p.base}, {"nsteps", p.nsteps}, {"posted", p.posted}, {"received", p.received},
          {"transmitted", p.transmitted}, {"done", p.done}};
}

json toJson(const RingConnection& c) {
  json j = {{"peer", rankJson(c.peer)},
            {"target_step", c.target_known ? json(c.target_step) : json(nullptr)},
            {"observed_step", c.observed_known ? json(c.observed_step) : json(nullptr)},
            {"waiting", c.waiting}};
  j["base_step"] = optionalJson(c.base_step);
  j["posted_step"] = optionalJson(c.posted_step);
  if (!c.transport.empty()) j["transport"] = c.transport;
  if (!c.counter_memory.empty()) j["counter_memory"] = c.counter_memory;
  if (c.proxy) j["proxy"] = toJson(*c.proxy);
  return j;
}

std::optional<RingProxyProgress> proxyFromJson(const json& j) {
  auto it = j.find("proxy");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw std::runtime_error("proxy is not an object");
  RingProxyProgress p;
  p.base = getOr<uint64_t>(*it, "base", 0);
  p.nsteps = getOr<uint64_t>(*it, "nsteps", 0);
  p.posted = getOr<uint64_t>(*it, "posted", 0);
  p.received = getOr<uint64_t>(*it, "received", 0);
  p.transmitted = getOr<uint64_t>(*it, "transmitted", 0);
  p.done = getOr<uint64_t>(*it, "done", 0);
  return p;
}

std::optional<RingConnection> connectionFromJson(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw std::runtime_error(std::string(key) + " is not an object");
  RingConnection c;
  c.peer = rankOr(*it, "peer");
  std::optional<uint64_t> target = getOptional<uint64_t>(*it, "target_step");
  std::optional<uint64_t> observed = getOptional<uint64_t>(*it, "observed_step");
  c.target_known = target.has_value();
  c.target_step = target.value_or(0);
  c.observed_known = observed.has_value();
  c.observed_step = observed.value_or(0);
  c.waiting = getOr(*it, "waiting", false);
  c.base_step = getOptional<uint64_t>(*it, "base_step");
  c.posted_step = getOptional<uint64_t>(*it, "posted_step");
  c.transport = getOr<std::string>(*it, "transport", "");
  c.counter_memory = getOr<std::string>(*it, "counter_memory", "");
  c.proxy = proxyFromJson(*it);
  return c;
}

std::optional<RingMismatch> mismatchFromJson(const json& j) {
  auto it = j.find("mismatch");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) throw std::runtime_error("mismatch is not an object");
  return RingMismatch{getOr<uint64_t>(*it, "arrived_seq", 0), getOr<std::string>(*it, "arrived_op", "")};
}

RingProgress ringFromJsonOrThrow(const json& j) {
  if (!j.is_object()) throw std::runtime_error("ring_progress record is not an object");
  RingProgress r;
  r.comm = getOr<std::string>(j, "comm", "");
  r.nccl_comm = getOr<std::string>(j, "nccl_comm", "");
  r.op = getOr<std::string>(j, "op", "");
  std::optional<uint64_t> seq = getOptional<uint64_t>(j, "seq");
  r.seq_known = seq.has_value();
  r.seq = seq.value_or(0);
  r.channel = rankOr(j, "channel");
  r.rank = rankOr(j, "rank");
  r.prev = rankOr(j, "prev");
  r.next = rankOr(j, "next");
  r.recv = connectionFromJson(j, "recv");
  r.send = connectionFromJson(j, "send");
  r.comm_rank = getOptional<int>(j, "comm_rank");
  r.comm_size = getOptional<int>(j, "comm_size");
  r.algorithm = getOr<std::string>(j, "algorithm", "");
  r.protocol = getOr<std::string>(j, "protocol", "");
  r.source = getOr<std::string>(j, "source", "");
  r.stalled = getOr(j, "stalled", false);
  r.mismatch = mismatchFromJson(j);
  r.nccl_op_count = getOptional<uint64_t>(j, "nccl_op_count");
  forEachIn(j, "waiting_threads", [&](const json& w) {
    if (!w.is_object()) throw std::runtime_error("waiting thread is not an object");
    r.waiting_threads.push_back({getOr<int64_t>(w, "tid", 0), getOr<std::string>(w, "name", ""),
                                 getOr<std::string>(w, "function", ""), getOr<std::string>(w, "direction", "")});
  });
  return r;
}

}  // namespace

nlohmann::json toJson(const RingProgress& r) {
  json j = {{"comm", r.comm},
            {"op", r.op},
            {"seq", r.seq_known ? json(r.seq) : json(nullptr)},
            {"channel", rankJson(r.channel)},
            {"rank", rankJson(r.rank)},
            {"prev", rankJson(r.prev)},
            {"next", rankJson(r.next)}};
  if (!r.nccl_comm.empty()) j["nccl_comm"] = r.nccl_comm;
  j["recv"] = r.recv ? toJson(*r.recv) : json(nullptr);
  j["send"] = r.send ? toJson(*r.send) : json(nullptr);
  j["comm_rank"] = r.comm_rank ? json(*r.comm_rank) : json(nullptr);
  j["comm_size"] = r.comm_size ? json(*r.comm_size) : json(nullptr);
  j["algorithm"] = r.algorithm;
  j["protocol"] = r.protocol;
  j["source"] = r.source;
  j["stalled"] = r.stalled;
  j["mismatch"] = r.mismatch ? json{{"arrived_seq", r.mismatch->arrived_seq}, {"arrived_op", r.mismatch->arrived_op}}
                             : json(nullptr);
  json waiters = json::array();
  for (const RingWaiter& w : r.waiting_threads) {
    json wj = {{"tid", w.tid}, {"name", w.name}, {"function", w.function}};
    wj["direction"] = w.direction.empty() ? json(nullptr) : json(w.direction);
    waiters.push_back(std::move(wj));
  }
  j["waiting_threads"] = std::move(waiters);
  if (r.nccl_op_count) j["nccl_op_count"] = *r.nccl_op_count;
  return j;
}

Expected<RingProgress> ringProgressFromJson(const nlohmann::json& j) {
  try {
    return ringFromJsonOrThrow(j);
  } catch (const std::exception& e) {
    return Error{std::string("ring_progress: ") + e.what()};
  }
}

nlohmann::json toJson(const ForensicsDump& d) {
  json j = {{"schema_version", d.schema_version},
            {"pid", d.pid},
            {"host", d.host},
            {"exe", d.exe},
            {"cmdline", d.cmdline},
            {"process_state", d.process_state},
            {"time_unix_s", d.time_unix_s},
            {"backend_requested", d.backend_requested},
            {"backend", d.backend},
            {"unwinder", d.unwinder},
            {"debugger", d.debugger},
            {"python_version", d.python_version},
            {"errors", d.errors}};
  j["target_exited_during"] = d.target_exited_during.empty() ? json(nullptr) : json(d.target_exited_during);
  j["rank"] = d.rank ? json(*d.rank) : json(nullptr);
  json threads = json::array();
  for (const ThreadStack& t : d.threads) threads.push_back(toJson(t));
  j["threads"] = std::move(threads);
  json rings = json::array();
  for (const RingProgress& r : d.ring_progress) rings.push_back(toJson(r));
  j["ring_progress"] = std::move(rings);
  json phases = json::array();
  for (const CollectionPhase& p : d.phases) {
    json pj = {{"name", p.name}, {"seconds", p.seconds}, {"ok", p.ok}};
    pj["error"] = p.error.empty() ? json(nullptr) : json(p.error);
    phases.push_back(std::move(pj));
  }
  j["phases"] = std::move(phases);
  return j;
}

Expected<ForensicsDump> forensicsDumpFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    ForensicsDump d;
    d.schema_version = getOr(j, "schema_version", 1);
    d.rank = getOptional<int>(j, "rank");
    d.pid = getOr<int64_t>(j, "pid", 0);
    d.host = getOr<std::string>(j, "host", "");
    d.exe = getOr<std::string>(j, "exe", "");
    d.cmdline = getOr<std::vector<std::string>>(j, "cmdline", {});
    d.process_state = getOr<std::string>(j, "process_state", "");
    d.time_unix_s = getOr(j, "time_unix_s", 0.0);
    d.backend_requested = getOr<std::string>(j, "backend_requested", "");
    d.backend = getOr<std::string>(j, "backend", "");
    d.unwinder = getOr<std::string>(j, "unwinder", "");
    d.debugger = getOr<std::string>(j, "debugger", "");
    d.python_version = getOr<std::string>(j, "python_version", "");
    d.errors = getOr<std::vector<std::string>>(j, "errors", {});
    d.target_exited_during = getOr<std::string>(j, "target_exited_during", "");
    forEachIn(j, "threads", [&](const json& t) {
      Expected<ThreadStack> thread = threadStackFromJson(t);
      if (!thread) throw std::runtime_error(thread.error());
      d.threads.push_back(std::move(*thread));
    });
    forEachIn(j, "ring_progress", [&](const json& r) { d.ring_progress.push_back(ringFromJsonOrThrow(r)); });
    forEachIn(j, "phases", [&](const json& p) {
      if (!p.is_object()) throw std::runtime_error("phase is not an object");
      d.phases.push_back({getOr<std::string>(p, "name", ""), getOr(p, "seconds", 0.0), getOr(p, "ok", false),
                          getOr<std::string>(p, "error", "")});
    });
    return d;
  } catch (const std::exception& e) {
    return Error{std::string("forensics dump: ") + e.what()};
  }
}

Expected<ForensicsDump> forensicsDumpFromText(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"forensics dump: not valid JSON (truncated or corrupt)"};
  return forensicsDumpFromJson(j);
}

}  // namespace hangwatch
