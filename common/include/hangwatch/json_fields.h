#pragma once
// Field access shared by the dump readers and writers: readers are tolerant (a missing
// or null field is "unset"), but a present field of the wrong type throws
// nlohmann::json::type_error, which each *FromJson function turns into an Error.
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace hangwatch::json_fields {

template <typename T>
std::optional<T> getOptional(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

template <typename T>
T getOr(const nlohmann::json& j, const char* key, T fallback) {
  auto v = getOptional<T>(j, key);
  return v ? *v : fallback;
}

template <typename T>
void putOptional(nlohmann::json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

// null for an empty optional, so the key is always present in what we write.
template <typename T>
nlohmann::json optionalJson(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
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
