#include "hangwatch/dumpio/forensics_dump_fast_reader.h"

#include <simdjson.h>

#include <optional>
#include <string>
#include <utility>

#include "hangwatch/dumpio/ondemand_fields.h"

namespace hangwatch::dumpio {
namespace {

static_assert(kFastReaderPadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

// ForensicsDump fields (DESIGN.md §5), read the way the common reader reads them.
class DumpFields : public OnDemandFields {
 public:
  explicit DumpFields(FastReadOptions options) : options_(options) {}

  bool frame(od::value v, StackFrame& f) {
    std::string kind = "native";
    f.function = "??";
    if (!object(v, "frame", [&](std::string_view k, od::value m) {
          if (is(k, "function")) return str(m, f.function, "frame function");
          if (is(k, "kind")) return str(m, kind, "frame kind");
          if (is(k, "file")) return str(m, f.file, "frame file");
          if (is(k, "line")) return optionalInteger(m, f.line, "frame line");
          if (is(k, "module")) return str(m, f.module, "frame module");
          if (is(k, "pc")) return optionalInteger(m, f.pc, "frame pc");
          if (is(k, "offset")) return optionalInteger(m, f.offset, "frame offset");
          return true;
        }))
      return false;
    if (kind == "python") f.kind = FrameKind::kPython;
    else if (kind != "native") return fail("frame: unknown frame kind '" + kind + "'");
    return true;
  }

  // A frame straight into the stack being built: its strings are never copied out.
  bool frameInto(od::value v, stackmerge::StackTable::Builder& stack) {
    std::string_view function = "??", file, module, kind = "native";
    std::optional<int> line;
    std::optional<uint64_t> unused;
    if (!object(v, "frame", [&](std::string_view k, od::value m) {
          if (is(k, "function")) return strView(m, function, "frame function");
          if (is(k, "kind")) return strView(m, kind, "frame kind");
          if (is(k, "file")) return strView(m, file, "frame file");
          if (is(k, "line")) return optionalInteger(m, line, "frame line");
          if (is(k, "module")) return strView(m, module, "frame module");
          if (is(k, "pc")) return optionalInteger(m, unused, "frame pc");
          if (is(k, "offset")) return optionalInteger(m, unused, "frame offset");
          return true;
        }))
      return false;
    FrameKind frame_kind = FrameKind::kNative;
    if (kind == "python") frame_kind = FrameKind::kPython;
    else if (kind != "native") return fail("frame: unknown frame kind '" + std::string(kind) + "'");
    stack.add(frame_kind, function, file, line, module);
    return true;
  }

  bool frames(od::value v, std::vector<StackFrame>& out, const char* what) {
    out.clear();
    return array(v, what, [&](od::value e) { return frame(e, out.emplace_back()); });
  }

  bool thread(od::value v, ThreadStack& t) {
    const bool intern = options_.stacks && options_.stack_ids;
    if (intern) stack_.clear();
    const bool ok = object(v, "thread", [&](std::string_view k, od::value m) {
      if (is(k, "frames") && intern) {
        stack_.clear();
        return array(m, "frames", [&](od::value e) { return frameInto(e, stack_); });
      }
      if (is(k, "frames")) return frames(m, t.frames, "frames");
      if (is(k, "tid")) return integer(m, t.tid, "tid");
      if (is(k, "name")) return str(m, t.name, "thread name");
      if (is(k, "os_name")) return str(m, t.os_name, "os_name");
      if (is(k, "state")) return str(m, t.state, "state");
      if (is(k, "wchan")) return str(m, t.wchan, "wchan");
      if (is(k, "native_frames")) return options_.skip_raw_frames || frames(m, t.native_frames, "native_frames");
      if (is(k, "python_frames")) return options_.skip_raw_frames || frames(m, t.python_frames, "python_frames");
      if (is(k, "merge_note")) return str(m, t.merge_note, "merge_note");
      return true;
    });
    if (ok && intern) options_.stack_ids->push_back(options_.stacks->intern(stack_));
    return ok;
  }

  bool connection(od::value v, std::optional<RingConnection>& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) {
      out.reset();
      return true;
    }
    RingConnection conn;
    conn.target_known = conn.observed_known = false;  // absent or null: the reader could not see it
    if (!object(v, what, [&](std::string_view k, od::value m) {
          if (is(k, "peer")) return rankField(m, conn.peer, "peer");
          if (is(k, "target_step")) return knownInteger(m, conn.target_step, conn.target_known, "target_step");
          if (is(k, "observed_step")) return knownInteger(m, conn.observed_step, conn.observed_known, "observed_step");
          if (is(k, "waiting")) return boolean(m, conn.waiting, "waiting");
          if (is(k, "base_step")) return optionalInteger(m, conn.base_step, "base_step");
          if (is(k, "posted_step")) return optionalInteger(m, conn.posted_step, "posted_step");
          if (is(k, "transport")) return str(m, conn.transport, "transport");
          if (is(k, "counter_memory")) return str(m, conn.counter_memory, "counter_memory");
          if (is(k, "proxy")) return proxy(m, conn.proxy);
          return true;
        }))
      return false;
    out = conn;
    return true;
  }

  // A rank, peer or channel: null (not known to the reader) and negatives read as -1.
  bool rankField(od::value v, int& out, const char* what) {
    std::optional<int> r;
    if (!optionalInteger(v, r, what)) return false;
    out = r && *r >= 0 ? *r : -1;
    return true;
  }

  template <typename Int>
  bool knownInteger(od::value v, Int& out, bool& known, const char* what) {
    std::optional<Int> i;
    if (!optionalInteger(v, i, what)) return false;
    known = i.has_value();
    out = i.value_or(0);
    return true;
  }

  bool proxy(od::value v, std::optional<RingProxyProgress>& out) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, "proxy")) return false;
    if (null) {
      out.reset();
      return true;
    }
    RingProxyProgress p;
    if (!object(v, "proxy", [&](std::string_view k, od::value m) {
          if (is(k, "base")) return integer(m, p.base, "proxy base");
          if (is(k, "nsteps")) return integer(m, p.nsteps, "proxy nsteps");
          if (is(k, "posted")) return integer(m, p.posted, "proxy posted");
          if (is(k, "received")) return integer(m, p.received, "proxy received");
          if (is(k, "transmitted")) return integer(m, p.transmitted, "proxy transmitted");
          if (is(k, "done")) return integer(m, p.done, "proxy done");
          return true;
        }))
      return false;
    out = p;
    return true;
  }

  bool mismatch(od::value v, std::optional<RingMismatch>& out) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, "mismatch")) return false;
    if (null) {
      out.reset();
      return true;
    }
    RingMismatch mm;
    if (!object(v, "mismatch", [&](std::string_view k, od::value m) {
          if (is(k, "arrived_seq")) return integer(m, mm.arrived_seq, "arrived_seq");
          if (is(k, "arrived_op")) return str(m, mm.arrived_op, "arrived_op");
          return true;
        }))
      return false;
    out = mm;
    return true;
  }

  bool waiter(od::value v, RingWaiter& w) {
    return object(v, "waiting thread", [&](std::string_view k, od::value m) {
      if (is(k, "tid")) return integer(m, w.tid, "tid");
      if (is(k, "name")) return str(m, w.name, "name");
      if (is(k, "function")) return str(m, w.function, "function");
      if (is(k, "direction")) return str(m, w.direction, "direction");
      return true;
    });
  }

  bool ring(od::value v, RingProgress& r) {
    // What a record does not say, the reader did not know (as forensics_dump.cc reads it).
    r.seq_known = false;
    r.channel = r.rank = -1;
    return object(v, "ring_progress record", [&](std::string_view k, od::value m) {
      if (is(k, "comm")) return str(m, r.comm, "comm");
      if (is(k, "nccl_comm")) return str(m, r.nccl_comm, "nccl_comm");
      if (is(k, "op")) return str(m, r.op, "op");
      if (is(k, "seq")) return knownInteger(m, r.seq, r.seq_known, "seq");
      if (is(k, "channel")) return rankField(m, r.channel, "channel");
      if (is(k, "rank")) return rankField(m, r.rank, "rank");
      if (is(k, "prev")) return rankField(m, r.prev, "prev");
      if (is(k, "next")) return rankField(m, r.next, "next");
      if (is(k, "nccl_op_count")) return optionalInteger(m, r.nccl_op_count, "nccl_op_count");
      if (is(k, "recv")) return connection(m, r.recv, "recv");
      if (is(k, "send")) return connection(m, r.send, "send");
      if (is(k, "comm_rank")) return optionalInteger(m, r.comm_rank, "comm_rank");
      if (is(k, "comm_size")) return optionalInteger(m, r.comm_size, "comm_size");
      if (is(k, "algorithm")) return str(m, r.algorithm, "algorithm");
      if (is(k, "protocol")) return str(m, r.protocol, "protocol");
      if (is(k, "source")) return str(m, r.source, "source");
      if (is(k, "stalled")) return boolean(m, r.stalled, "stalled");
      if (is(k, "mismatch")) return mismatch(m, r.mismatch);
      if (is(k, "waiting_threads")) {
        r.waiting_threads.clear();
        return array(m, "waiting_threads", [&](od::value e) { return waiter(e, r.waiting_threads.emplace_back()); });
      }
      return true;
    });
  }

  bool phase(od::value v, CollectionPhase& p) {
    return object(v, "phase", [&](std::string_view k, od::value m) {
      if (is(k, "name")) return str(m, p.name, "phase name");
      if (is(k, "seconds")) return number(m, p.seconds, "seconds");
      if (is(k, "ok")) return boolean(m, p.ok, "ok");
      if (is(k, "error")) return str(m, p.error, "phase error");
      return true;
    });
  }

  bool dump(od::object o, ForensicsDump& d) {
    return object(o, "forensics dump", [&](std::string_view k, od::value m) {
      if (is(k, "threads")) {
        d.threads.clear();
        if (options_.stack_ids) options_.stack_ids->clear();
        return array(m, "threads", [&](od::value e) { return thread(e, d.threads.emplace_back()); });
      }
      if (is(k, "ring_progress")) {
        d.ring_progress.clear();
        return array(m, "ring_progress", [&](od::value e) { return ring(e, d.ring_progress.emplace_back()); });
      }
      if (is(k, "phases")) {
        d.phases.clear();
        return array(m, "phases", [&](od::value e) { return phase(e, d.phases.emplace_back()); });
      }
      if (is(k, "schema_version")) return integer(m, d.schema_version, "schema_version");
      if (is(k, "rank")) return optionalInteger(m, d.rank, "rank");
      if (is(k, "pid")) return integer(m, d.pid, "pid");
      if (is(k, "host")) return str(m, d.host, "host");
      if (is(k, "exe")) return str(m, d.exe, "exe");
      if (is(k, "cmdline")) return strings(m, d.cmdline, "cmdline");
      if (is(k, "process_state")) return str(m, d.process_state, "process_state");
      if (is(k, "time_unix_s")) return number(m, d.time_unix_s, "time_unix_s");
      if (is(k, "backend_requested")) return str(m, d.backend_requested, "backend_requested");
      if (is(k, "backend")) return str(m, d.backend, "backend");
      if (is(k, "unwinder")) return str(m, d.unwinder, "unwinder");
      if (is(k, "debugger")) return str(m, d.debugger, "debugger");
      if (is(k, "python_version")) return str(m, d.python_version, "python_version");
      if (is(k, "errors")) return strings(m, d.errors, "errors");
      if (is(k, "target_exited_during")) return str(m, d.target_exited_during, "target_exited_during");
      return true;
    });
  }

 private:
  FastReadOptions options_;
  stackmerge::StackTable::Builder stack_;
};

}  // namespace

Expected<ForensicsDump> forensicsDumpFromPaddedText(std::string_view text, FastReadOptions options) {
  // A parser keeps its buffers between documents; one per loader thread.
  thread_local od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc))
    return Error{std::string("forensics dump: ") + simdjson::error_message(e)};
  od::json_type type;
  if (auto e = doc.type().get(type)) return Error{std::string("forensics dump: ") + simdjson::error_message(e)};
  if (type != od::json_type::object) return Error{"forensics dump: not a JSON object"};
  od::object o;
  if (auto e = doc.get_object().get(o)) return Error{std::string("forensics dump: ") + simdjson::error_message(e)};
  if (options.stack_ids) options.stack_ids->clear();
  DumpFields fields(options);
  ForensicsDump d;
  if (!fields.dump(o, d)) return Error{"forensics dump: " + fields.error()};
  // At the end of the text current_location() is OUT_OF_BOUNDS; anything else is more JSON.
  const char* where = nullptr;
  if (doc.current_location().get(where) != simdjson::OUT_OF_BOUNDS)
    return Error{"forensics dump: text after the dump"};
  return d;
}

Expected<ForensicsDump> forensicsDumpFromTextFast(std::string_view text, FastReadOptions options) {
  thread_local std::string padded;
  padded.assign(text.data(), text.size());
  padded.resize(text.size() + kFastReaderPadding);
  return forensicsDumpFromPaddedText(std::string_view(padded.data(), text.size()), options);
}

}  // namespace hangwatch::dumpio
