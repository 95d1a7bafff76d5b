// RankSet::parse on arbitrary text: never crashes, and parse(toString(s)) == s.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "hangwatch/stackmerge/rank_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hangwatch::stackmerge::RankSet;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto set = RankSet::parse(text);
  if (!set) return 0;
  const std::string printed = set->toString();
  auto again = RankSet::parse(printed);
  if (!again || !(*again == *set)) {
    std::fprintf(stderr, "rank set: \"%.*s\" printed as \"%s\"\n", static_cast<int>(size), text.data(), printed.c_str());
    std::abort();
  }
  size_t counted = 0;
  for (const auto& [first, last] : set->intervals()) counted += static_cast<size_t>(int64_t{last} - first) + 1;
  if (counted != set->size()) std::abort();
  return 0;
}
