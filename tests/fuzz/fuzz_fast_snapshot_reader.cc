// dumpio's fast (simdjson) watchdog snapshot reader: never crashes on arbitrary bytes, reads
// any snapshot the common writer produces exactly as the common (nlohmann) reader does, and
// where both accept an input they agree. (Values it never reads, such as unknown keys, it
// skips unvalidated, so it may accept text the common reader rejects as corrupt.)
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto fast = hangwatch::dumpio::watchdogSnapshotFromTextFast(text);
  const nlohmann::json j = hangwatch::fuzz::parseOrDiscard(text.data(), text.size());
  auto slow = j.is_discarded() ? hangwatch::Expected<hangwatch::WatchdogSnapshot>(hangwatch::Error{"not JSON"})
                               : hangwatch::watchdogSnapshotFromJson(j);
  // The report uses the fast result whenever there is one: it must be the common reader's.
  if (fast && slow)
    hangwatch::fuzz::requireSame(hangwatch::toJson(*slow), hangwatch::toJson(*fast), "fast vs common snapshot reader");
  if (!slow) return 0;
  const nlohmann::json written = hangwatch::toJson(*slow);
  auto fast_canonical = hangwatch::dumpio::watchdogSnapshotFromTextFast(written.dump(1));
  if (!fast_canonical) {
    std::fprintf(stderr, "fast reader rejected the writer's output: %s\n", fast_canonical.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*fast_canonical), "fast snapshot reader vs common reader");
  return 0;
}
