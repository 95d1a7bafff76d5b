#pragma once
// Shared by the fuzz targets: a reader that accepted an input must produce a record that
// survives write -> read -> write unchanged; anything else is a reader/writer disagreement.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace hangwatch::fuzz {

// Parses without exceptions; a discarded value means "not JSON", which readers must report.
inline nlohmann::json parseOrDiscard(const char* data, size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

inline void requireSame(const nlohmann::json& first, const nlohmann::json& second, const char* what) {
  if (first == second) return;
  std::fprintf(stderr, "%s: write -> read -> write changed the record\nfirst:  %s\nsecond: %s\n", what,
               first.dump().c_str(), second.dump().c_str());
  std::abort();
}

}  // namespace hangwatch::fuzz
