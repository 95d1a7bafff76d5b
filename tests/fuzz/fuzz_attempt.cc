// attemptFromJson (ATTEMPT.json) on arbitrary JSON: never crashes, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/attempt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = hangwatch::fuzz::parseOrDiscard(reinterpret_cast<const char*>(data), size);
  if (j.is_discarded()) return 0;
  auto attempt = hangwatch::attemptFromJson(j);
  if (!attempt) return 0;
  const nlohmann::json written = hangwatch::toJson(*attempt);
  auto reread = hangwatch::attemptFromJson(written);
  if (!reread) {
    std::fprintf(stderr, "attempt: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "attempt");
  return 0;
}
