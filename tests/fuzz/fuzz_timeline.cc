// timelineWindowFromJson (what readTimelineFile calls) on arbitrary bytes: never crashes or
// throws, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/timeline_window.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto window = hangwatch::timelineWindowFromJson(j);
  if (!window) return 0;
  const nlohmann::json written = hangwatch::toJson(*window);
  auto reread = hangwatch::timelineWindowFromJson(written);
  if (!reread) {
    std::fprintf(stderr, "timeline: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "timeline");
  return 0;
}
