#pragma once
// Typed field readers over one simdjson On-Demand document, shared by the fast dump and
// snapshot readers: null leaves a field as it is (its default), any other wrong type fails
// with a sentence; unread values (unknown keys) are skipped by simdjson itself.
#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hangwatch::dumpio {

class OnDemandFields {
 public:
  const std::string& error() const { return error_; }

  // Keys are compared ~40 M times in a 16,384-rank report: with `name` a constant from a
  // field list, this inlines to a length check and a fixed-size compare.
  static bool is(std::string_view key, std::string_view name) {
    return key.size() == name.size() && std::memcmp(key.data(), name.data(), name.size()) == 0;
  }

  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  bool failJson(simdjson::error_code e, const char* what) {
    return fail(std::string(what) + ": " + simdjson::error_message(e));
  }

  // A key without escapes is its raw text: no copy into the string buffer. The raw text is
  // valid JSON here, so a closing quote comes before the padding ends.
  static bool plainKey(simdjson::ondemand::field& field, std::string_view& key) {
    const char* start = field.key().raw();
    for (const char* p = start;; ++p) {
      if (*p == '"') {
        key = std::string_view(start, static_cast<size_t>(p - start));
        return true;
      }
      if (*p == '\\') return false;
    }
  }

  // The value's type, having consumed it when it is null (then `null` is set).
  bool kind(simdjson::ondemand::value& v, simdjson::ondemand::json_type& type, bool& null, const char* what) {
    null = false;
    if (auto e = v.type().get(type)) return failJson(e, what);
    if (type != simdjson::ondemand::json_type::null) return true;
    // type() looks at the first byte only; is_null() checks the whole literal.
    bool is_null = false;
    if (auto e = v.is_null().get(is_null)) return failJson(e, what);
    if (!is_null) return fail(std::string(what) + ": invalid literal");
    null = true;
    return true;
  }

  // A view into the parser's string buffer, valid until the next document.
  bool strView(simdjson::ondemand::value v, std::string_view& out, const char* what) {
    // Most values have the expected type: try that first; a wrong type leaves `v` unread.
    switch (auto e = v.get_string().get(out)) {
      case simdjson::SUCCESS: return true;
      case simdjson::INCORRECT_TYPE: break;
      default: return failJson(e, what);
    }
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::string) return fail(std::string(what) + " is not a string");
    if (auto e = v.get_string().get(out)) return failJson(e, what);
    return true;
  }

  bool str(simdjson::ondemand::value v, std::string& out, const char* what) {
    std::string_view s;
    bool had = false;
    if (!strViewIfPresent(v, s, had, what)) return false;
    if (had) out.assign(s.data(), s.size());
    return true;
  }

  bool strViewIfPresent(simdjson::ondemand::value v, std::string_view& out, bool& had, const char* what) {
    switch (auto e = v.get_string().get(out)) {
      case simdjson::SUCCESS: had = true; return true;
      case simdjson::INCORRECT_TYPE: break;
      default: return failJson(e, what);
    }
    simdjson::ondemand::json_type type;
    bool null;
    had = false;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::string) return fail(std::string(what) + " is not a string");
    if (auto e = v.get_string().get(out)) return failJson(e, what);
    had = true;
    return true;
  }

  // Like the common reader's checkedGet: an integral float converts, anything out of range fails.
  template <typename Int>
  bool integerValue(simdjson::ondemand::value& v, Int& out, const char* what) {
    using Limits = std::numeric_limits<Int>;
    simdjson::ondemand::number n;
    if (auto e = v.get_number().get(n)) return failJson(e, what);
    auto out_of_range = [&] { return fail(std::string(what) + " is not an integer in range"); };
    switch (n.get_number_type()) {
      case simdjson::ondemand::number_type::floating_point_number: {
        const double d = n.get_double();
        if (!std::isfinite(d) || d != std::trunc(d) || d < static_cast<double>(Limits::min()) ||
            d >= std::ldexp(1.0, Limits::digits))
          return out_of_range();
        out = static_cast<Int>(d);
        return true;
      }
      case simdjson::ondemand::number_type::unsigned_integer: {
        const uint64_t u = n.get_uint64();
        if (u > static_cast<uint64_t>(Limits::max())) return out_of_range();
        out = static_cast<Int>(u);
        return true;
      }
      case simdjson::ondemand::number_type::signed_integer: {
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

  // The common case without the type checks: an integer in range. Anything else (null, a
  // float, out of range, not a number) leaves `v` unread for the careful path.
  template <typename Int>
  static bool quickInteger(simdjson::ondemand::value& v, Int& out) {
    using Limits = std::numeric_limits<Int>;
    if constexpr (Limits::is_signed) {
      int64_t i;
      if (v.get_int64().get(i) != simdjson::SUCCESS || i < static_cast<int64_t>(Limits::min()) ||
          i > static_cast<int64_t>(Limits::max()))
        return false;
      out = static_cast<Int>(i);
    } else {
      uint64_t u;
      if (v.get_uint64().get(u) != simdjson::SUCCESS || u > static_cast<uint64_t>(Limits::max())) return false;
      out = static_cast<Int>(u);
    }
    return true;
  }

  template <typename Int>
  bool integer(simdjson::ondemand::value v, Int& out, const char* what) {
    if (quickInteger(v, out)) return true;
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::number) return fail(std::string(what) + " is not a number");
    return integerValue(v, out, what);
  }

  template <typename Int>
  bool optionalInteger(simdjson::ondemand::value v, std::optional<Int>& out, const char* what) {
    if (Int quick{}; quickInteger(v, quick)) {
      out = quick;
      return true;
    }
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) {
      out.reset();
      return true;
    }
    if (type != simdjson::ondemand::json_type::number) return fail(std::string(what) + " is not a number");
    Int i{};
    if (!integerValue(v, i, what)) return false;
    out = i;
    return true;
  }

  bool number(simdjson::ondemand::value v, double& out, const char* what) {
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::number) return fail(std::string(what) + " is not a number");
    if (auto e = v.get_double().get(out)) return failJson(e, what);
    return true;
  }

  bool optionalNumber(simdjson::ondemand::value v, std::optional<double>& out, const char* what) {
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) {
      out.reset();
      return true;
    }
    if (type != simdjson::ondemand::json_type::number) return fail(std::string(what) + " is not a number");
    double d = 0;
    if (auto e = v.get_double().get(d)) return failJson(e, what);
    out = d;
    return true;
  }

  bool boolean(simdjson::ondemand::value v, bool& out, const char* what) {
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::boolean) return fail(std::string(what) + " is not a boolean");
    if (auto e = v.get_bool().get(out)) return failJson(e, what);
    return true;
  }

  // An optional array: null is empty, anything but an array fails. `each(value)` reads one element.
  template <typename F>
  bool array(simdjson::ondemand::value v, const char* what, F&& each) {
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    if (null) return true;
    if (type != simdjson::ondemand::json_type::array) return fail(std::string(what) + " is not an array");
    simdjson::ondemand::array a;
    if (auto e = v.get_array().get(a)) return failJson(e, what);
    for (auto element : a) {
      simdjson::ondemand::value ev;
      if (auto e = std::move(element).get(ev)) return failJson(e, what);
      if (!each(ev)) return false;
    }
    return true;
  }

  // An object; `member(key, value)` reads one member's value and returns false on error.
  template <typename F>
  bool object(simdjson::ondemand::object o, const char* what, F&& member) {
    for (auto field_result : o) {
      simdjson::ondemand::field field;
      if (auto e = std::move(field_result).get(field)) return failJson(e, what);
      std::string_view key;
      if (!plainKey(field, key)) {
        if (auto e = field.unescaped_key().get(key)) return failJson(e, what);
      }
      if (!member(key, field.value())) return false;
    }
    return true;
  }

  template <typename F>
  bool object(simdjson::ondemand::value v, const char* what, F&& member) {
    simdjson::ondemand::json_type type;
    if (auto e = v.type().get(type)) return failJson(e, what);
    if (type != simdjson::ondemand::json_type::object) return fail(std::string(what) + " is not a JSON object");
    simdjson::ondemand::object o;
    if (auto e = v.get_object().get(o)) return failJson(e, what);
    return object(o, what, member);
  }

 private:
  std::string error_;
};

// Starts `doc` on `text` (with simdjson's padding readable after it) and gives its top-level
// object: what every reader opens a file with. The error, when there is one: simdjson's words,
// or "not a JSON object".
inline std::optional<std::string> openObject(simdjson::ondemand::parser& parser, simdjson::ondemand::document& doc,
                                             std::string_view text, simdjson::ondemand::object& out) {
  if (auto e = parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc))
    return simdjson::error_message(e);
  simdjson::ondemand::json_type type;
  if (auto e = doc.type().get(type)) return simdjson::error_message(e);
  if (type != simdjson::ondemand::json_type::object) return "not a JSON object";
  if (auto e = doc.get_object().get(out)) return simdjson::error_message(e);
  return std::nullopt;
}

// True when nothing follows the document read (at the end of the text current_location() is
// OUT_OF_BOUNDS; anything else is more JSON).
inline bool endsAfter(simdjson::ondemand::document& doc) {
  const char* where = nullptr;
  return doc.current_location().get(where) == simdjson::OUT_OF_BOUNDS;
}

}  // namespace hangwatch::dumpio
