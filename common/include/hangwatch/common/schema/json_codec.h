#pragma once
// The writer of every dump record, and the tolerant nlohmann reader for the places that
// read one record without simdjson (the watchdog inside the job reads TRIGGER.json; the
// collector reads its debugger's ring records), both driven by the records' field lists.
// Reading: a missing or null field keeps what the record starts from, unknown keys are
// skipped, a present field of the wrong type is an error (dumpio's reader says the same).
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/json_fields.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch::schema {

template <Record T>
nlohmann::json toJson(const T& record);

namespace detail {

template <typename M>
bool isEmpty(const M& v) {
  if constexpr (IsOptional<M>::value) {
    return !v.has_value();
  } else if constexpr (IsVector<M>::value || IsStringMap<M>::value || std::is_same_v<M, std::string>) {
    return v.empty();
  } else if constexpr (std::is_arithmetic_v<M> && !std::is_same_v<M, bool>) {
    return v == M{};
  } else {
    return false;
  }
}

template <typename M>
nlohmann::json valueJson(const M& v) {
  if constexpr (Record<M>) {
    return schema::toJson(v);
  } else if constexpr (NamedEnum<M>) {
    return std::string(enumName(v));
  } else if constexpr (SelfCoded<M>) {
    return v.toJson();
  } else if constexpr (IsOptional<M>::value) {
    return v ? valueJson(*v) : nlohmann::json(nullptr);
  } else if constexpr (IsVector<M>::value || IsStdArray<M>::value) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : v) a.push_back(valueJson(e));
    return a;
  } else if constexpr (IsStringMap<M>::value) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, e] : v) o[k] = valueJson(e);
    return o;
  } else {
    return nlohmann::json(v);
  }
}

template <typename S, typename M>
void write(nlohmann::json& j, const S& s, const Field<S, M>& f) {
  const M& v = s.*f.member;
  if (f.empty != Empty::kAsValue && isEmpty(v)) {
    if (f.empty == Empty::kNull) j[std::string(f.key)] = nullptr;
    return;
  }
  j[std::string(f.key)] = valueJson(v);
}

template <typename S>
void write(nlohmann::json& j, const S& s, const RankField<S>& f) {
  const int v = s.*f.member;
  j[std::string(f.key)] = v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr);
}

template <typename S, typename M>
void write(nlohmann::json& j, const S& s, const KnownField<S, M>& f) {
  j[std::string(f.key)] = s.*f.known ? nlohmann::json(s.*f.member) : nlohmann::json(nullptr);
}

template <typename S, typename Codec>
void write(nlohmann::json& j, const S& s, const CustomField<S, Codec>& f) {
  if constexpr (requires { Codec::omit(s); }) {
    if (Codec::omit(s)) return;
  }
  Codec::write(j[std::string(f.key)], s);
}

template <typename S, typename Codec>
void write(nlohmann::json& j, const S& s, const InlineField<S, Codec>&) {
  Codec::write(j, s);
}

[[noreturn]] inline void wrongType(const char* what, const char* expected) {
  throw std::runtime_error(fmt::format("{} is not {}", what, expected));
}

template <Record T>
void readRecord(const nlohmann::json& j, T& out, const char* what);

// `v` is present and not null.
template <typename M>
void readValue(const nlohmann::json& v, M& out, const char* what) {
  if constexpr (Record<M>) {
    out = initialOf<M>();
    readRecord(v, out, what);
  } else if constexpr (NamedEnum<M>) {
    if (!v.is_string()) wrongType(what, "a string");
    const auto& name = v.get_ref<const std::string&>();
    if (!enumFromName(name, out)) throw std::runtime_error(fmt::format("unknown {} '{}'", what, name));
  } else if constexpr (SelfCoded<M>) {
    auto value = M::fromJson(v);
    if (!value) throw std::runtime_error(fmt::format("{}: {}", what, value.error()));
    out = std::move(*value);
  } else if constexpr (IsOptional<M>::value) {
    typename M::value_type value{};
    if constexpr (Record<typename M::value_type>) value = initialOf<typename M::value_type>();
    readValue(v, value, what);
    out = std::move(value);
  } else if constexpr (IsVector<M>::value) {
    if (!v.is_array()) wrongType(what, "an array");
    out.clear();
    using Element = typename M::value_type;
    for (const nlohmann::json& e : v) {
      Element value{};
      if constexpr (Record<Element>) {
        value = initialOf<Element>();
        readRecord(e, value, Schema<Element>::what);
      } else if (!e.is_null()) {
        readValue(e, value, what);
      }
      out.push_back(std::move(value));
    }
  } else if constexpr (IsStdArray<M>::value) {
    if (!v.is_array()) wrongType(what, "an array");
    for (size_t i = 0; i < out.size() && i < v.size(); ++i)
      if (!v[i].is_null()) readValue(v[i], out[i], what);
  } else if constexpr (IsStringMap<M>::value) {
    if (!v.is_object()) wrongType(what, "an object");
    out.clear();
    for (auto it = v.begin(); it != v.end(); ++it) {
      typename M::mapped_type value{};
      if (!it->is_null()) readValue(*it, value, what);
      out.emplace(it.key(), std::move(value));
    }
  } else if constexpr (std::is_same_v<M, std::string>) {
    if (!v.is_string()) wrongType(what, "a string");
    out = v.get<std::string>();
  } else if constexpr (std::is_same_v<M, bool>) {
    if (!v.is_boolean()) wrongType(what, "a boolean");
    out = v.get<bool>();
  } else {
    if (!v.is_number()) wrongType(what, "a number");
    out = json_fields::checkedGet<M>(v, what);
  }
}

template <typename S, typename M>
void read(const nlohmann::json& v, S& s, const Field<S, M>& f) {
  if (!v.is_null()) {
    readValue(v, s.*f.member, f.what);
  } else if constexpr (IsOptional<M>::value) {
    (s.*f.member).reset();
  } else if constexpr (IsVector<M>::value || IsStringMap<M>::value) {
    (s.*f.member).clear();
  }
}

template <typename S>
void read(const nlohmann::json& v, S& s, const RankField<S>& f) {
  std::optional<int> r;
  if (!v.is_null()) readValue(v, r, f.what);
  s.*f.member = r && *r >= 0 ? *r : -1;
}

template <typename S, typename M>
void read(const nlohmann::json& v, S& s, const KnownField<S, M>& f) {
  std::optional<M> value;
  if (!v.is_null()) readValue(v, value, f.what);
  s.*f.known = value.has_value();
  s.*f.member = value.value_or(M{});
}

template <typename S, typename Codec>
void read(const nlohmann::json& v, S& s, const CustomField<S, Codec>& f) {
  Codec::read(v, s, f.what);
}

template <Record T>
void readRecord(const nlohmann::json& j, T& out, const char* what) {
  if (!j.is_object()) wrongType(what, "a JSON object");
  std::apply(
      [&](const auto&... f) {
        (
            [&] {
              if constexpr (IsInline<std::decay_t<decltype(f)>>::value) {
                std::decay_t<decltype(f)>::Codec::read(j, out, f.what);
              } else if (auto it = j.find(f.key); it != j.end()) {
                read(*it, out, f);
              }
            }(),
            ...);
      },
      Schema<T>::fields);
}

}  // namespace detail

template <Record T>
nlohmann::json toJson(const T& record) {
  nlohmann::json j = nlohmann::json::object();
  std::apply([&](const auto&... f) { (detail::write(j, record, f), ...); }, Schema<T>::fields);
  return j;
}

// The record in `j`; an error names `what` ("TRIGGER.json: ...").
template <Record T>
Expected<T> fromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    T out = initialOf<T>();
    detail::readRecord(j, out, Schema<T>::what);
    return out;
  } catch (const std::exception& e) {
    return Error{fmt::format("{}: {}", Schema<T>::what, e.what())};
  }
}

}  // namespace hangwatch::schema
