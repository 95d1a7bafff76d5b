// triggerFromJson on arbitrary JSON: never crashes, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/trigger_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = hangwatch::fuzz::parseOrDiscard(reinterpret_cast<const char*>(data), size);
  if (j.is_discarded()) return 0;
  auto trigger = hangwatch::triggerFromJson(j);
  if (!trigger) return 0;
  const nlohmann::json written = hangwatch::toJson(*trigger);
  auto reread = hangwatch::triggerFromJson(written);
  if (!reread) {
    std::fprintf(stderr, "trigger: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "trigger");
  return 0;
}
