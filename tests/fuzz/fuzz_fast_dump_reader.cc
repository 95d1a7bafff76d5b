// stackmerge's fast (simdjson) forensics dump reader: never crashes on arbitrary bytes, and on
// any dump the common writer produces it reads exactly what the common (nlohmann) reader reads,
// and with skip_raw_frames the same less the raw frames.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_roundtrip.h"
#include "hangwatch/forensics_dump.h"
#include "hangwatch/forensics_dump_fast_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto fast = hangwatch::stackmerge::forensicsDumpFromTextFast(text);
  auto slow = hangwatch::forensicsDumpFromText(std::string(text));
  if (!slow) return 0;
  const nlohmann::json written = hangwatch::toJson(*slow);
  const std::string canonical = written.dump(1);
  auto fast_canonical = hangwatch::stackmerge::forensicsDumpFromTextFast(canonical);
  if (!fast_canonical) {
    std::fprintf(stderr, "fast reader rejected the writer's output: %s\n", fast_canonical.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*fast_canonical), "fast reader vs common reader");
  auto summary = hangwatch::stackmerge::forensicsDumpFromTextFast(canonical, {.skip_raw_frames = true});
  if (!summary) {
    std::fprintf(stderr, "skip_raw_frames rejected the writer's output: %s\n", summary.error().c_str());
    std::abort();
  }
  hangwatch::ForensicsDump without_raw = *slow;
  for (hangwatch::ThreadStack& t : without_raw.threads) {
    t.native_frames.clear();
    t.python_frames.clear();
  }
  hangwatch::fuzz::requireSame(hangwatch::toJson(without_raw), hangwatch::toJson(*summary),
                               "skip_raw_frames vs common reader");
  return 0;
}
