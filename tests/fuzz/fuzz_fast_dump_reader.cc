// dumpio's fast (simdjson) forensics dump reader: never crashes on arbitrary bytes, and on
// any dump the common writer produces it reads exactly what the common (nlohmann) reader reads,
// with skip_raw_frames the same less the raw frames, and when interning into a StackTable (what
// the report does) each thread's stack has exactly the labels and kinds of its merged frames.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/stackmerge/frame_label.h"
#include "hangwatch/stackmerge/stack_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto fast = hangwatch::dumpio::forensicsDumpFromTextFast(text);
  auto slow = hangwatch::forensicsDumpFromText(std::string(text));
  if (!slow) return 0;
  const nlohmann::json written = hangwatch::toJson(*slow);
  const std::string canonical = written.dump(1);
  auto fast_canonical = hangwatch::dumpio::forensicsDumpFromTextFast(canonical);
  if (!fast_canonical) {
    std::fprintf(stderr, "fast reader rejected the writer's output: %s\n", fast_canonical.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*fast_canonical), "fast reader vs common reader");
  auto summary = hangwatch::dumpio::forensicsDumpFromTextFast(canonical, {.skip_raw_frames = true});
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
  hangwatch::stackmerge::StackTable table;
  std::vector<uint32_t> ids;
  auto interned = hangwatch::dumpio::forensicsDumpFromTextFast(
      canonical, {.skip_raw_frames = true, .stacks = &table, .stack_ids = &ids});
  if (!interned || ids.size() != slow->threads.size()) {
    std::fprintf(stderr, "interning reader disagrees with the common reader on the writer's output\n");
    std::abort();
  }
  for (size_t t = 0; t < ids.size(); ++t) {
    const auto frames = table.frames(ids[t]);
    const auto& expected = slow->threads[t].frames;
    bool same = frames.size() == expected.size();
    for (size_t f = 0; same && f < frames.size(); ++f)
      same = frames[f].kind == expected[f].kind && frames[f].label == hangwatch::stackmerge::frameLabel(expected[f]);
    if (!same || !interned->threads[t].frames.empty()) {
      std::fprintf(stderr, "thread %zu: interned stack differs from the common reader's frames\n", t);
      std::abort();
    }
  }
  return 0;
}
