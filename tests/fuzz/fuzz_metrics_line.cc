// metricsWindowFromLine (what readMetricsFile calls per line) on arbitrary bytes: never
// crashes or throws, and what it accepts round-trips.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/metrics_window.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto window = hangwatch::metricsWindowFromLine(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!window) return 0;
  const nlohmann::json written = hangwatch::toJson(*window);
  auto reread = hangwatch::metricsWindowFromJson(written);
  if (!reread) {
    std::fprintf(stderr, "metrics window: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "metrics window");
  return 0;
}
