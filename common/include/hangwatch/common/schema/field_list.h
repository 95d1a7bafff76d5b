#pragma once
// A dump record's fields, listed once: each record type T has a `Schema<T>` with its JSON
// keys, the members they hold and how an empty value is written. The writer and both
// readers (json_codec.h here, dumpio's simdjson one) are generic over these lists, so a
// field is added, renamed or retyped in one place.
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace hangwatch::schema {

// How a field holding nothing (an empty optional, string, vector or map, or a zero number)
// is written: as itself (an empty optional is null), as null, or not at all. Readers take
// all three.
enum class Empty { kAsValue, kNull, kOmit };

// A plain member: a number, bool, string, an enum with `EnumNames`, a record with a
// `Schema`, a value that codes itself (`SelfCoded`), or an optional, vector or
// string-keyed map of those.
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
// and `read(const nlohmann::json& value, S&, const char* what)` (`value` may be null); an
// optional `omit(const S&)` leaves the key out. dumpio has its simdjson reader.
template <typename S, typename Codec>
struct CustomField {
  using Struct = S;
  std::string_view key;
  const char* what;
};

// Keys that share one encoding (tables and the rows that index them): `Codec` writes
// them into the record's own object and reads them from it, with static
// `write(nlohmann::json& object, const S&)` and `read(const nlohmann::json& object, S&,
// const char* what)`. Only the nlohmann codec takes them.
template <typename S, typename C>
struct InlineField {
  using Struct = S;
  using Codec = C;
  std::string_view key;  // none: the codec names its own keys
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
// For a codec that names its struct (`using Struct = S`).
template <typename Codec>
  requires requires { typename Codec::Struct; }
constexpr CustomField<typename Codec::Struct, Codec> customField(std::string_view key, const char* what) {
  return {key, what};
}

template <typename Codec>
constexpr InlineField<typename Codec::Struct, Codec> inlineField(const char* what) {
  return {{}, what};
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
// A fixed-size list (a value per stage): written as a JSON array; a longer array's extra
// elements are not read, a shorter one leaves the rest as they were.
template <typename T>
struct IsStdArray : std::false_type {};
template <typename T, size_t N>
struct IsStdArray<std::array<T, N>> : std::true_type {};
template <typename F>
struct IsInline : std::false_type {};
template <typename S, typename C>
struct IsInline<InlineField<S, C>> : std::true_type {};
template <typename T>
struct IsStringMap : std::false_type {};
template <typename T>
struct IsStringMap<std::map<std::string, T>> : std::true_type {};

// A value type with its own JSON form: `toJson()` and `static fromJson(json)` returning an
// Expected (a histogram).
template <typename T>
concept SelfCoded = requires(const T& t) {
  t.toJson();
  T::fromJson(t.toJson());
};

// The struct and type of a member pointer, for codecs written over one member.
template <typename P>
struct MemberPointer;
template <typename S, typename M>
struct MemberPointer<M S::*> {
  using Struct = S;
  using Type = M;
};

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
