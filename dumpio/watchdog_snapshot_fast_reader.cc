#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

#include <simdjson.h>

#include <string>

#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/dumpio/ondemand_fields.h"

namespace hangwatch::dumpio {
namespace {

namespace od = simdjson::ondemand;

// WatchdogSnapshot fields (DESIGN.md §4), with the common reader's defaults.
class SnapshotFields : public OnDemandFields {
 public:
  bool identity(od::value v, SnapshotIdentity& id) {
    return object(v, "identity", [&](std::string_view k, od::value m) {
      if (is(k, "rank")) return optionalInteger(m, id.rank, "identity rank");
      if (is(k, "local_rank")) return optionalInteger(m, id.local_rank, "identity local_rank");
      if (is(k, "world_size")) return optionalInteger(m, id.world_size, "identity world_size");
      if (is(k, "rank_source")) return str(m, id.rank_source, "identity rank_source");
      if (is(k, "host")) return str(m, id.host, "identity host");
      if (is(k, "pid")) return integer(m, id.pid, "identity pid");
      if (is(k, "job_id")) return str(m, id.job_id, "identity job_id");
      if (is(k, "device")) return optionalInteger(m, id.device, "identity device");
      if (is(k, "cuda_visible_devices")) return str(m, id.cuda_visible_devices, "identity cuda_visible_devices");
      return true;
    });
  }

  bool stuckOp(od::value v, std::optional<StuckOp>& out) {
    StuckOp s;
    if (!object(v, "stuck_op", [&](std::string_view k, od::value m) {
          if (is(k, "op")) return str(m, s.op, "stuck_op op");
          if (is(k, "comm")) return str(m, s.comm, "stuck_op comm");
          if (is(k, "seq")) return optionalInteger(m, s.seq, "stuck_op seq");
          if (is(k, "bytes")) return integer(m, s.bytes, "stuck_op bytes");
          if (is(k, "peer")) return optionalInteger(m, s.peer, "stuck_op peer");
          if (is(k, "stream")) return str(m, s.stream, "stuck_op stream");
          if (is(k, "age_s")) return number(m, s.age_s, "stuck_op age_s");
          return true;
        }))
      return false;
    out = s;
    return true;
  }

  bool trigger(od::value v, std::optional<TriggerRecord>& out) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, "trigger")) return false;
    if (null) return true;
    TriggerRecord t;
    if (!object(v, "trigger", [&](std::string_view k, od::value m) {
          if (is(k, "schema_version")) return integer(m, t.schema_version, "trigger schema_version");
          if (is(k, "rank")) return optionalInteger(m, t.rank, "trigger rank");
          if (is(k, "host")) return str(m, t.host, "trigger host");
          if (is(k, "pid")) return integer(m, t.pid, "trigger pid");
          if (is(k, "time_unix_s")) return number(m, t.time_unix_s, "trigger time_unix_s");
          if (is(k, "reason")) return str(m, t.reason, "trigger reason");
          if (is(k, "stuck_op")) {
            od::json_type st;
            bool st_null;
            if (!kind(m, st, st_null, "stuck_op")) return false;
            if (st_null) {
              t.stuck_op.reset();
              return true;
            }
            return stuckOp(m, t.stuck_op);
          }
          return true;
        }))
      return false;
    out = std::move(t);
    return true;
  }

  bool comm(od::value v, SnapshotComm& c) {
    return object(v, "comm", [&](std::string_view k, od::value m) {
      if (is(k, "hash")) return str(m, c.hash, "comm hash");
      if (is(k, "rank")) return integer(m, c.rank, "comm rank");
      if (is(k, "size")) return integer(m, c.size, "comm size");
      if (is(k, "device")) return integer(m, c.device, "comm device");
      if (is(k, "state")) return str(m, c.state, "comm state");
      if (is(k, "last_issued_seq")) return optionalInteger(m, c.last_issued_seq, "last_issued_seq");
      if (is(k, "last_completed_seq")) return optionalInteger(m, c.last_completed_seq, "last_completed_seq");
      if (is(k, "nccl_id")) return str(m, c.nccl_id, "comm nccl_id");
      if (is(k, "address")) return str(m, c.address, "comm address");
      return true;
    });
  }

  bool pending(od::value v, SnapshotPendingOp& p) {
    return object(v, "pending op", [&](std::string_view k, od::value m) {
      if (is(k, "op")) return str(m, p.op, "pending op");
      if (is(k, "class")) return str(m, p.op_class, "pending class");
      if (is(k, "comm")) return str(m, p.comm, "pending comm");
      if (is(k, "seq")) return optionalInteger(m, p.seq, "pending seq");
      if (is(k, "bytes")) return integer(m, p.bytes, "pending bytes");
      if (is(k, "dtype")) return str(m, p.dtype, "pending dtype");
      if (is(k, "count")) return integer(m, p.count, "pending count");
      if (is(k, "peer")) return optionalInteger(m, p.peer, "pending peer");
      if (is(k, "age_s")) return number(m, p.age_s, "pending age_s");
      if (is(k, "issued_s_ago")) return number(m, p.issued_s_ago, "pending issued_s_ago");
      if (is(k, "gpu_started")) return boolean(m, p.gpu_started, "pending gpu_started");
      return true;
    });
  }

  bool stream(od::value v, SnapshotStream& st) {
    return object(v, "stream", [&](std::string_view k, od::value m) {
      if (is(k, "stream")) return str(m, st.stream, "stream handle");
      if (is(k, "device")) return optionalInteger(m, st.device, "stream device");
      if (is(k, "pending")) {
        st.pending.clear();
        return array(m, "pending", [&](od::value e) { return pending(e, st.pending.emplace_back()); });
      }
      return true;
    });
  }

  bool hostCall(od::value v, SnapshotHostCall& h) {
    return object(v, "host call", [&](std::string_view k, od::value m) {
      if (is(k, "call")) return str(m, h.call, "host call");
      if (is(k, "tid")) return integer(m, h.tid, "host call tid");
      if (is(k, "thread_name")) return str(m, h.thread_name, "host call thread_name");
      if (is(k, "age_s")) return number(m, h.age_s, "host call age_s");
      if (is(k, "comm")) return str(m, h.comm, "host call comm");
      if (is(k, "seq")) return optionalInteger(m, h.seq, "host call seq");
      return true;
    });
  }

  // {"<stage name>": value, ...}: each known stage name of either direction.
  template <typename F>
  bool stages(od::value v, const char* what, F&& each) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    return object(v, what, [&](std::string_view k, od::value m) {
      const int stage = proxyStageIndex(k);
      return stage < 0 ? true : each(stage, m);
    });
  }

  bool connection(od::value v, SnapshotProxyConnection& c) {
    return object(v, "progress connection", [&](std::string_view k, od::value m) {
      if (is(k, "nccl_comm")) return str(m, c.nccl_comm, "connection nccl_comm");
      if (is(k, "rank")) return integer(m, c.rank, "connection rank");
      if (is(k, "nranks")) return integer(m, c.nranks, "connection nranks");
      if (is(k, "channel")) return integer(m, c.channel, "connection channel");
      if (is(k, "peer")) return integer(m, c.peer, "connection peer");
      if (is(k, "dir")) return str(m, c.dir, "connection dir");
      if (is(k, "ops")) return integer(m, c.ops, "connection ops");
      if (is(k, "ops_done")) return integer(m, c.ops_done, "connection ops_done");
      if (is(k, "untracked_ops")) return integer(m, c.untracked_ops, "connection untracked_ops");
      if (is(k, "steps"))
        return stages(m, "steps", [&](int i, od::value x) { return integer(x, c.steps[i], "steps"); });
      if (is(k, "moved_s_ago"))
        return stages(m, "moved_s_ago",
                      [&](int i, od::value x) { return optionalNumber(x, c.moved_s_ago[i], "moved_s_ago"); });
      return true;
    });
  }

  bool kernelChannel(od::value v, SnapshotKernelChannel& kc) {
    return object(v, "kernel channel", [&](std::string_view k, od::value m) {
      if (is(k, "nccl_comm")) return str(m, kc.nccl_comm, "kernel channel nccl_comm");
      if (is(k, "channel")) return integer(m, kc.channel, "kernel channel");
      if (is(k, "started")) return integer(m, kc.started, "kernel channel started");
      if (is(k, "stopped")) return integer(m, kc.stopped, "kernel channel stopped");
      if (is(k, "started_s_ago")) return optionalNumber(m, kc.started_s_ago, "started_s_ago");
      if (is(k, "stopped_s_ago")) return optionalNumber(m, kc.stopped_s_ago, "stopped_s_ago");
      return true;
    });
  }

  bool progress(od::value v, std::optional<SnapshotProgress>& out) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, "progress")) return false;
    out.reset();
    if (null) return true;
    SnapshotProgress p;
    if (!object(v, "progress", [&](std::string_view k, od::value m) {
          if (is(k, "plugin_inits")) return integer(m, p.plugin_inits, "plugin_inits");
          if (is(k, "dropped_connections")) return integer(m, p.dropped_connections, "dropped_connections");
          if (is(k, "dropped_kernel_channels")) return integer(m, p.dropped_kernel_channels, "dropped_kernel_channels");
          if (is(k, "connections")) {
            p.connections.clear();
            return array(m, "connections", [&](od::value e) { return connection(e, p.connections.emplace_back()); });
          }
          if (is(k, "kernel_channels")) {
            p.kernel_channels.clear();
            return array(m, "kernel_channels",
                         [&](od::value e) { return kernelChannel(e, p.kernel_channels.emplace_back()); });
          }
          return true;
        }))
      return false;
    out = std::move(p);
    return true;
  }

  bool health(od::value v, WatchdogHealth& h) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, "health")) return false;
    if (null) return true;
    return object(v, "health", [&](std::string_view k, od::value m) {
      if (is(k, "failures_logged")) return integer(m, h.failures_logged, "failures_logged");
      if (is(k, "ops_timed")) return integer(m, h.ops_timed, "ops_timed");
      if (is(k, "ops_completed")) return integer(m, h.ops_completed, "ops_completed");
      if (is(k, "events_exhausted")) return integer(m, h.events_exhausted, "events_exhausted");
      if (is(k, "ops_dropped")) return integer(m, h.ops_dropped, "ops_dropped");
      return true;
    });
  }

  bool snapshot(od::object o, WatchdogSnapshot& s, bool& had_identity) {
    return object(o, "watchdog snapshot", [&](std::string_view k, od::value m) {
      if (is(k, "schema_version")) return integer(m, s.schema_version, "schema_version");
      if (is(k, "time_unix_s")) return number(m, s.time_unix_s, "time_unix_s");
      if (is(k, "timeout_s")) return number(m, s.timeout_s, "timeout_s");
      if (is(k, "detected_here")) return boolean(m, s.detected_here, "detected_here");
      if (is(k, "identity")) {
        od::json_type type;
        bool null;
        if (!kind(m, type, null, "identity")) return false;
        // Each occurrence starts from defaults, as the common reader's last-one-wins does.
        s.identity = SnapshotIdentity{};
        had_identity = !null;
        if (null) return true;
        return identity(m, s.identity);
      }
      if (is(k, "trigger")) {
        s.trigger.reset();
        return trigger(m, s.trigger);
      }
      if (is(k, "comms")) {
        s.comms.clear();
        return array(m, "comms", [&](od::value e) { return comm(e, s.comms.emplace_back()); });
      }
      if (is(k, "streams")) {
        s.streams.clear();
        return array(m, "streams", [&](od::value e) { return stream(e, s.streams.emplace_back()); });
      }
      if (is(k, "host_calls")) {
        s.host_calls.clear();
        return array(m, "host_calls", [&](od::value e) { return hostCall(e, s.host_calls.emplace_back()); });
      }
      if (is(k, "health")) {
        s.health = WatchdogHealth{};
        return health(m, s.health);
      }
      if (is(k, "progress")) return progress(m, s.progress);
      return true;
    });
  }
};

Error snapshotError(const std::string& why) { return Error{"watchdog snapshot: " + why}; }

}  // namespace

Expected<WatchdogSnapshot> watchdogSnapshotFromPaddedText(std::string_view text, SnapshotReadOptions options) {
  thread_local od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc))
    return snapshotError(simdjson::error_message(e));
  od::json_type type;
  if (auto e = doc.type().get(type)) return snapshotError(simdjson::error_message(e));
  if (type != od::json_type::object) return snapshotError("not a JSON object");
  od::object o;
  if (auto e = doc.get_object().get(o)) return snapshotError(simdjson::error_message(e));
  SnapshotFields fields;
  WatchdogSnapshot s;
  bool had_identity = false;
  if (!fields.snapshot(o, s, had_identity)) return snapshotError(fields.error());
  const char* where = nullptr;
  if (doc.current_location().get(where) != simdjson::OUT_OF_BOUNDS) return snapshotError("text after the snapshot");
  if (options.require_identity && !had_identity) return snapshotError("no identity object");
  return s;
}

Expected<WatchdogSnapshot> watchdogSnapshotFromTextFast(std::string_view text, SnapshotReadOptions options) {
  thread_local std::string padded;
  padded.assign(text.data(), text.size());
  padded.resize(text.size() + kFastReaderPadding);
  return watchdogSnapshotFromPaddedText(std::string_view(padded.data(), text.size()), options);
}

}  // namespace hangwatch::dumpio
