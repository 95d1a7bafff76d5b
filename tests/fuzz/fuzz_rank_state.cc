// rankStateFromJson on arbitrary JSON: never crashes, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/rank_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = hangwatch::fuzz::parseOrDiscard(reinterpret_cast<const char*>(data), size);
  if (j.is_discarded()) return 0;
  auto state = hangwatch::rankStateFromJson(j);
  if (!state) return 0;
  const nlohmann::json written = hangwatch::toJson(*state);
  auto reread = hangwatch::rankStateFromJson(written);
  if (!reread) {
    std::fprintf(stderr, "rank state: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "rank state");
  return 0;
}
