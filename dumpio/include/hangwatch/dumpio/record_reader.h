#pragma once
// Reads any record with a field list (hangwatch/common/schema/field_list.h) from a simdjson
// On-Demand value, with the same rules as the common nlohmann reader: a missing or null
// field keeps what the record starts from, unknown keys are skipped, a wrong type fails.
// Key matching unrolls over the list at compile time, so it inlines like hand-written code.
#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/common/schema/field_list.h"
#include "hangwatch/dumpio/ondemand_fields.h"

namespace hangwatch::dumpio {

// Specialised for each schema::CustomField codec: `static bool read(RecordReader&,
// simdjson::ondemand::value, S&)`.
template <typename Codec>
struct OnDemandCustom;

// An override for one record's members: returns std::nullopt for a key it leaves to the
// field list, else whether reading it went well.
struct NoOverride {
  std::optional<bool> operator()(std::string_view, simdjson::ondemand::value) const { return std::nullopt; }
};

class RecordReader : public OnDemandFields {
 public:
  // `out` holds what the record starts from.
  template <schema::Record T, typename Override = NoOverride>
  bool record(simdjson::ondemand::value v, T& out, const char* what, Override&& override = {}) {
    return object(v, what, [&](std::string_view k, simdjson::ondemand::value m) { return member(k, m, out, override); });
  }

  template <schema::Record T, typename Override = NoOverride>
  bool record(simdjson::ondemand::object o, T& out, const char* what, Override&& override = {}) {
    return object(o, what, [&](std::string_view k, simdjson::ondemand::value m) { return member(k, m, out, override); });
  }

  // A record that may be null: `out` is then empty.
  template <schema::Record T>
  bool optionalRecord(simdjson::ondemand::value v, std::optional<T>& out, const char* what) {
    simdjson::ondemand::json_type type;
    bool null;
    if (!kind(v, type, null, what)) return false;
    out.reset();
    if (null) return true;
    T value = schema::initialOf<T>();
    if (!record(v, value, what)) return false;
    out = std::move(value);
    return true;
  }

  // `v` read into `out` by its type; null leaves a plain value as it is and empties an
  // optional or a list.
  template <typename M>
  bool value(simdjson::ondemand::value v, M& out, const char* what) {
    if constexpr (schema::Record<M>) {
      std::optional<M> r;
      if (!optionalRecord(v, r, what)) return false;
      out = r ? std::move(*r) : schema::initialOf<M>();
      return true;
    } else if constexpr (schema::NamedEnum<M>) {
      return enumValue(v, out, what);
    } else if constexpr (schema::IsOptional<M>::value) {
      return optionalValue(v, out, what);
    } else if constexpr (schema::IsVector<M>::value) {
      return list(v, out, what);
    } else if constexpr (schema::IsStdArray<M>::value) {
      size_t i = 0;
      return array(v, what, [&](simdjson::ondemand::value e) { return i >= out.size() || value(e, out[i++], what); });
    } else if constexpr (std::is_same_v<M, std::string>) {
      return str(v, out, what);
    } else if constexpr (std::is_same_v<M, std::string_view>) {
      return strView(v, out, what);
    } else if constexpr (std::is_same_v<M, bool>) {
      return boolean(v, out, what);
    } else if constexpr (std::is_same_v<M, double>) {
      return number(v, out, what);
    } else if constexpr (std::is_floating_point_v<M>) {
      double d = out;
      if (!number(v, d, what)) return false;
      out = static_cast<M>(d);
      return true;
    } else {
      return integer(v, out, what);
    }
  }

 private:
  template <typename T, typename Override>
  bool member(std::string_view k, simdjson::ondemand::value m, T& out, Override& override) {
    if constexpr (!std::is_same_v<std::remove_cvref_t<Override>, NoOverride>) {
      if (std::optional<bool> handled = override(k, m)) return *handled;
    }
    return std::apply(
        [&](const auto&... f) {
          bool ok = true;
          (void)((is(k, f.key) ? (ok = field(m, out, f), true) : false) || ...);
          return ok;
        },
        schema::Schema<T>::fields);
  }

  template <typename S, typename M>
  bool field(simdjson::ondemand::value m, S& s, const schema::Field<S, M>& f) {
    return value(m, s.*f.member, f.what);
  }

  template <typename S>
  bool field(simdjson::ondemand::value m, S& s, const schema::RankField<S>& f) {
    std::optional<int> r;
    if (!optionalInteger(m, r, f.what)) return false;
    s.*f.member = r && *r >= 0 ? *r : -1;
    return true;
  }

  template <typename S, typename M>
  bool field(simdjson::ondemand::value m, S& s, const schema::KnownField<S, M>& f) {
    std::optional<M> i;
    if (!optionalInteger(m, i, f.what)) return false;
    s.*f.known = i.has_value();
    s.*f.member = i.value_or(M{});
    return true;
  }

  template <typename S, typename Codec>
  bool field(simdjson::ondemand::value m, S& s, const schema::CustomField<S, Codec>&) {
    return OnDemandCustom<Codec>::read(*this, m, s);
  }

  template <typename E>
  bool enumValue(simdjson::ondemand::value v, E& out, const char* what) {
    std::string_view name;
    bool had = false;
    if (!strViewIfPresent(v, name, had, what)) return false;
    if (had && !schema::enumFromName(name, out)) return fail(fmt::format("unknown {} '{}'", what, name));
    return true;
  }

  template <typename T>
  bool optionalValue(simdjson::ondemand::value v, std::optional<T>& out, const char* what) {
    if constexpr (schema::Record<T>) {
      return optionalRecord(v, out, what);
    } else if constexpr (std::is_floating_point_v<T>) {
      return optionalNumber(v, out, what);
    } else {
      return optionalInteger(v, out, what);
    }
  }

  template <typename T>
  bool list(simdjson::ondemand::value v, std::vector<T>& out, const char* what) {
    out.clear();
    if constexpr (schema::Record<T>) {
      return array(v, what, [&](simdjson::ondemand::value e) {
        out.push_back(schema::initialOf<T>());
        return record(e, out.back(), schema::Schema<T>::what);
      });
    } else {
      return array(v, what, [&](simdjson::ondemand::value e) { return value(e, out.emplace_back(), what); });
    }
  }
};

}  // namespace hangwatch::dumpio
