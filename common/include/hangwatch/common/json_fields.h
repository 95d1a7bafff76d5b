#pragma once
// Field access for nlohmann readers (the schema codec, the metrics and timeline windows):
// a missing or null field is "unset", a present field of the wrong type or out of range
// throws, which each reader turns into an Error.
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace hangwatch::json_fields {

// get<T>() for an integer T converts any JSON number with a plain cast: a float out
// of T's range is undefined behaviour and a big unsigned wraps. Dumps come from crashing
// jobs and full disks, so a number that does not fit is an error like a wrong type.
template <typename T>
T checkedGet(const nlohmann::json& v, const char* key) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using Limits = std::numeric_limits<T>;
    auto out_of_range = [&] { return std::out_of_range(std::string(key) + " is not an integer in range"); };
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (!std::isfinite(d) || d != std::trunc(d) || d < static_cast<double>(Limits::min()) ||
          d >= std::ldexp(1.0, Limits::digits))
        throw out_of_range();
      return static_cast<T>(d);
    }
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(Limits::max())) throw out_of_range();
    } else if (v.is_number_integer()) {
      int64_t i = v.get<int64_t>();
      if ((Limits::is_signed && i < static_cast<int64_t>(Limits::min())) || (!Limits::is_signed && i < 0) ||
          (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(Limits::max())))
        throw out_of_range();
    }
  }
  return v.get<T>();
}

template <typename T>
std::optional<T> getOptional(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return checkedGet<T>(*it, key);
}

template <typename T>
T getOr(const nlohmann::json& j, const char* key, T fallback) {
  auto v = getOptional<T>(j, key);
  return v ? *v : fallback;
}

// An optional array field; a present non-array is an error.
inline const nlohmann::json& arrayOrEmpty(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return empty;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " is not an array");
  return *it;
}

}  // namespace hangwatch::json_fields
