#include "hangwatch/forensics_dump_fast_reader.h"

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace hangwatch::stackmerge {
namespace {

static_assert(kFastReaderPadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

// Field readers over one On-Demand document: null leaves the field as it is (the default),
// any other wrong type fails. Unread values (unknown keys) are skipped by simdjson itself.
class DumpFields {
 public:
  explicit DumpFields(FastReadOptions options) : options_(options) {}

  const std::string& error() const { return error_; }

  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  bool failJson(simdjson::error_code e, const char* what) {
    return fail(std::string(what) + ": " + simdjson::error_message(e));
  }

  // The value's type, having consumed it when it is null (then `null` is set).
  bool kind(od::value& v, od::json_type& type, bool& null, const char* what) {
    null = false;
    if (auto e = v.type().get(type)) return failJson(e, what);
    if (type != od::json_type::null) return true;
    // type() looks at the first byte only; is_null() checks the whole literal.
    bool is_null = false;
    if (auto e = v.is_null().get(is_null)) return failJson(e, what);
    if (!is_null) return fail(std::string(what) + ": invalid literal");
    null = true;
    return true;
  }

  bool str(od::value v, std::string& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != od::json_type::string) return fail(std::string(what) + " is not a string");
    std::string_view s;
    if (auto e = v.get_string().get(s)) return failJson(e, what);
    out.assign(s.data(), s.size());
    return true;
  }

  // Like the common reader's checkedGet: an integral float converts, anything out of range fails.
  template <typename Int>
  bool integerValue(od::value& v, Int& out, const char* what) {
    using Limits = std::numeric_limits<Int>;
    od::number n;
    if (auto e = v.get_number().get(n)) return failJson(e, what);
    auto out_of_range = [&] { return fail(std::string(what) + " is not an integer in range"); };
    switch (n.get_number_type()) {
      case od::number_type::floating_point_number: {
        const double d = n.get_double();
        if (!std::isfinite(d) || d != std::trunc(d) || d < static_cast<double>(Limits::min()) ||
            d >= std::ldexp(1.0, Limits::digits))
          return out_of_range();
        out = static_cast<Int>(d);
        return true;
      }
      case od::number_type::unsigned_integer: {
        const uint64_t u = n.get_uint64();
        if (u > static_cast<uint64_t>(Limits::max())) return out_of_range();
        out = static_cast<Int>(u);
        return true;
      }
      case od::number_type::signed_integer: {
        const int64_t i = n.get_int64();
        if ((Limits::is_signed && i < static_cast<int64_t>(Limits::min())) || (!Limits::is_signed && i < 0) ||
            (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(Limits::max())))
          return out_of_range();
        out = static_cast<Int>(i);
        return true;
      }
    }
    return out_of_range();
  }

  template <typename Int>
  bool integer(od::value v, Int& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != od::json_type::number) return fail(std::string(what) + " is not a number");
    return integerValue(v, out, what);
  }

  template <typename Int>
  bool optionalInteger(od::value v, std::optional<Int>& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) {
      out.reset();
      return true;
    }
    if (type != od::json_type::number) return fail(std::string(what) + " is not a number");
    Int i{};
    if (!integerValue(v, i, what)) return false;
    out = i;
    return true;
  }

  bool number(od::value v, double& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != od::json_type::number) return fail(std::string(what) + " is not a number");
    if (auto e = v.get_double().get(out)) return failJson(e, what);
    return true;
  }

  bool boolean(od::value v, bool& out, const char* what) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != od::json_type::boolean) return fail(std::string(what) + " is not a boolean");
    if (auto e = v.get_bool().get(out)) return failJson(e, what);
    return true;
  }

  // An optional array: null is empty, anything but an array fails. `each(value)` reads one element.
  template <typename F>
  bool array(od::value v, const char* what, F&& each) {
    od::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != od::json_type::array) return fail(std::string(what) + " is not an array");
    od::array a;
    if (auto e = v.get_array().get(a)) return failJson(e, what);
    for (auto element : a) {
      od::value ev;
      if (auto e = std::move(element).get(ev)) return failJson(e, what);
      if (!each(ev)) return false;
    }
    return true;
  }

  // An object; `member(key, value)` reads one member's value and returns false on error.
  template <typename F>
  bool object(od::object o, const char* what, F&& member) {
    for (auto field_result : o) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return failJson(e, what);
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return failJson(e, what);
      if (!member(key, field.value())) return false;
    }
    return true;
  }

  template <typename F>
  bool object(od::value v, const char* what, F&& member) {
    od::json_type type;
    if (auto e = v.type().get(type)) return failJson(e, what);
    if (type != od::json_type::object) return fail(std::string(what) + " is not a JSON object");
    od::object o;
    if (auto e = v.get_object().get(o)) return failJson(e, what);
    return object(o, what, member);
  }

  bool strings(od::value v, std::vector<std::string>& out, const char* what) {
    out.clear();
    return array(v, what, [&](od::value e) { return str(e, out.emplace_back(), what); });
  }

  bool frame(od::value v, StackFrame& f) {
    std::string kind = "native";
    f.function = "??";
    if (!object(v, "frame", [&](std::string_view k, od::value m) {
          if (k == "function") return str(m, f.function, "frame function");
          if (k == "kind") return str(m, kind, "frame kind");
          if (k == "file") return str(m, f.file, "frame file");
          if (k == "line") return optionalInteger(m, f.line, "frame line");
          if (k == "module") return str(m, f.module, "frame module");
          if (k == "pc") return optionalInteger(m, f.pc, "frame pc");
          if (k == "offset") return optionalInteger(m, f.offset, "frame offset");
          return true;
        }))
      return false;
    if (kind == "python") f.kind = FrameKind::kPython;
    else if (kind != "native") return fail("frame: unknown frame kind '" + kind + "'");
    return true;
  }

  bool frames(od::value v, std::vector<StackFrame>& out, const char* what) {
    out.clear();
    return array(v, what, [&](od::value e) { return frame(e, out.emplace_back()); });
  }

  bool thread(od::value v, ThreadStack& t) {
    return object(v, "thread", [&](std::string_view k, od::value m) {
      if (k == "frames") return frames(m, t.frames, "frames");
      if (k == "tid") return integer(m, t.tid, "tid");
      if (k == "name") return str(m, t.name, "thread name");
      if (k == "os_name") return str(m, t.os_name, "os_name");
      if (k == "state") return str(m, t.state, "state");
      if (k == "wchan") return str(m, t.wchan, "wchan");
      if (k == "native_frames") return options_.skip_raw_frames || frames(m, t.native_frames, "native_frames");
      if (k == "python_frames") return options_.skip_raw_frames || frames(m, t.python_frames, "python_frames");
      if (k == "merge_note") return str(m, t.merge_note, "merge_note");
      return true;
    });
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
    if (!object(v, what, [&](std::string_view k, od::value m) {
          if (k == "peer") return integer(m, conn.peer, "peer");
          if (k == "target_step") return integer(m, conn.target_step, "target_step");
          if (k == "observed_step") return integer(m, conn.observed_step, "observed_step");
          if (k == "waiting") return boolean(m, conn.waiting, "waiting");
          if (k == "base_step") return optionalInteger(m, conn.base_step, "base_step");
          if (k == "posted_step") return optionalInteger(m, conn.posted_step, "posted_step");
          return true;
        }))
      return false;
    out = conn;
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
          if (k == "arrived_seq") return integer(m, mm.arrived_seq, "arrived_seq");
          if (k == "arrived_op") return str(m, mm.arrived_op, "arrived_op");
          return true;
        }))
      return false;
    out = mm;
    return true;
  }

  bool waiter(od::value v, RingWaiter& w) {
    return object(v, "waiting thread", [&](std::string_view k, od::value m) {
      if (k == "tid") return integer(m, w.tid, "tid");
      if (k == "name") return str(m, w.name, "name");
      if (k == "function") return str(m, w.function, "function");
      if (k == "direction") return str(m, w.direction, "direction");
      return true;
    });
  }

  bool ring(od::value v, RingProgress& r) {
    return object(v, "ring_progress record", [&](std::string_view k, od::value m) {
      if (k == "comm") return str(m, r.comm, "comm");
      if (k == "op") return str(m, r.op, "op");
      if (k == "seq") return integer(m, r.seq, "seq");
      if (k == "channel") return integer(m, r.channel, "channel");
      if (k == "rank") return integer(m, r.rank, "rank");
      if (k == "prev") return integer(m, r.prev, "prev");
      if (k == "next") return integer(m, r.next, "next");
      if (k == "recv") return connection(m, r.recv, "recv");
      if (k == "send") return connection(m, r.send, "send");
      if (k == "comm_rank") return optionalInteger(m, r.comm_rank, "comm_rank");
      if (k == "comm_size") return optionalInteger(m, r.comm_size, "comm_size");
      if (k == "algorithm") return str(m, r.algorithm, "algorithm");
      if (k == "protocol") return str(m, r.protocol, "protocol");
      if (k == "source") return str(m, r.source, "source");
      if (k == "stalled") return boolean(m, r.stalled, "stalled");
      if (k == "mismatch") return mismatch(m, r.mismatch);
      if (k == "waiting_threads") {
        r.waiting_threads.clear();
        return array(m, "waiting_threads", [&](od::value e) { return waiter(e, r.waiting_threads.emplace_back()); });
      }
      return true;
    });
  }

  bool phase(od::value v, CollectionPhase& p) {
    return object(v, "phase", [&](std::string_view k, od::value m) {
      if (k == "name") return str(m, p.name, "phase name");
      if (k == "seconds") return number(m, p.seconds, "seconds");
      if (k == "ok") return boolean(m, p.ok, "ok");
      if (k == "error") return str(m, p.error, "phase error");
      return true;
    });
  }

  bool dump(od::object o, ForensicsDump& d) {
    return object(o, "forensics dump", [&](std::string_view k, od::value m) {
      if (k == "threads") {
        d.threads.clear();
        return array(m, "threads", [&](od::value e) { return thread(e, d.threads.emplace_back()); });
      }
      if (k == "ring_progress") {
        d.ring_progress.clear();
        return array(m, "ring_progress", [&](od::value e) { return ring(e, d.ring_progress.emplace_back()); });
      }
      if (k == "phases") {
        d.phases.clear();
        return array(m, "phases", [&](od::value e) { return phase(e, d.phases.emplace_back()); });
      }
      if (k == "schema_version") return integer(m, d.schema_version, "schema_version");
      if (k == "rank") return optionalInteger(m, d.rank, "rank");
      if (k == "pid") return integer(m, d.pid, "pid");
      if (k == "host") return str(m, d.host, "host");
      if (k == "exe") return str(m, d.exe, "exe");
      if (k == "cmdline") return strings(m, d.cmdline, "cmdline");
      if (k == "process_state") return str(m, d.process_state, "process_state");
      if (k == "time_unix_s") return number(m, d.time_unix_s, "time_unix_s");
      if (k == "backend_requested") return str(m, d.backend_requested, "backend_requested");
      if (k == "backend") return str(m, d.backend, "backend");
      if (k == "unwinder") return str(m, d.unwinder, "unwinder");
      if (k == "debugger") return str(m, d.debugger, "debugger");
      if (k == "python_version") return str(m, d.python_version, "python_version");
      if (k == "errors") return strings(m, d.errors, "errors");
      return true;
    });
  }

 private:
  FastReadOptions options_;
  std::string error_;
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

}  // namespace hangwatch::stackmerge
