// forensicsDumpFromText on arbitrary bytes: never crashes, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/schema/json_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto dump = hangwatch::forensicsDumpFromText(text);
  if (!dump) return 0;
  const nlohmann::json written = hangwatch::toJson(*dump);
  auto reread = hangwatch::schema::fromJson<hangwatch::ForensicsDump>(written);
  if (!reread) {
    std::fprintf(stderr, "forensics dump: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "forensics dump");
  return 0;
}
