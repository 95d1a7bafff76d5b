#pragma once
// A dump record's fields, listed once: each record type T has a `Schema<T>` with its JSON
// keys, the members they hold and how an empty value is written. The writer and both
// readers (json_codec.h here, dumpio's simdjson one) are generic over these lists, so a
// field is added, renamed or retyped in one place.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace hangwatch::schema {

// How a field holding nothing (an empty optional or string) is written: as itself (an
// empty optional is null), as null, or not at all. Readers take all three.
enum class Empty { kAsValue, kNull, kOmit };

// A plain member: a number, bool, string, an enum with `EnumNames`, a record with a
// `Schema`, or an optional or vector of those.
template <typename S, typename M>
struct Field {
  using Struct = S;
  using Type = M;
  std::string_view key;
  M S::*member;
  const char* what;  // how a read error names the field
  Empty empty = Empty::kAsValue;
};

// A rank, peer or channel the reader could not tell: -1 in memory, null on disk; null or
// a negative number reads as -1.
template <typename S>
struct RankField {
  using Struct = S;
  std::string_view key;
  int S::*member;
  const char* what;
};

// A counter and whether it was read: null on disk when it was not (its 0 is then no data).
template <typename S, typename M>
struct KnownField {
  using Struct = S;
  std::string_view key;
  M S::*member;
  bool S::*known;
  const char* what;
};

// A field with its own encoding. `Codec` has static `write(nlohmann::json&, const S&)`
// and `read(const nlohmann::json&, S&)`; dumpio has its simdjson reader.
template <typename S, typename Codec>
struct CustomField {
  using Struct = S;
  std::string_view key;
  const char* what;
};

template <typename S, typename M>
constexpr Field<S, M> field(std::string_view key, M S::*member, const char* what, Empty empty = Empty::kAsValue) {
  return {key, member, what, empty};
}
template <typename S>
constexpr RankField<S> rankField(std::string_view key, int S::*member, const char* what) {
  return {key, member, what};
}
template <typename S, typename M>
constexpr KnownField<S, M> knownField(std::string_view key, M S::*member, bool S::*known, const char* what) {
  return {key, member, known, what};
}
template <typename Codec, typename S>
constexpr CustomField<S, Codec> customField(std::string_view key, const char* what) {
  return {key, what};
}

// Specialised for each record: `what` names it in errors, `fields` lists its fields and an
// optional `initial()` gives what a reader starts from (what a record does not say).
template <typename T>
struct Schema;

// Specialised for each enum written as a name: `names` pairs values with their names.
template <typename E>
struct EnumNames;

template <typename T>
concept Record = requires { Schema<T>::fields; };
template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires { EnumNames<E>::names; };

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

template <Record T>
T initialOf() {
  if constexpr (requires { Schema<T>::initial(); }) {
    return Schema<T>::initial();
  } else {
    return T{};
  }
}

// The value an enum's name means; false when it names none.
template <NamedEnum E>
constexpr bool enumFromName(std::string_view name, E& out) {
  for (const auto& [value, n] : EnumNames<E>::names)
    if (n == name) {
      out = value;
      return true;
    }
  return false;
}

template <NamedEnum E>
constexpr std::string_view enumName(E value) {
  for (const auto& [v, n] : EnumNames<E>::names)
    if (v == value) return n;
  return {};
}

namespace detail {
template <typename S, typename M, typename F>
constexpr bool holds(const F& f, M S::*member) {
  if constexpr (requires { f.member; } && std::is_same_v<decltype(f.member), M S::*>) {
    return f.member == member;
  } else {
    return false;
  }
}
}  // namespace detail

// The JSON key of the field that holds `member`, for code that reads one field its own way.
template <Record T, typename M>
constexpr std::string_view keyOf(M T::*member) {
  std::string_view key;
  std::apply([&](const auto&... f) { (void)((detail::holds(f, member) ? (key = f.key, true) : false) || ...); },
             Schema<T>::fields);
  return key;
}

}  // namespace hangwatch::schema
