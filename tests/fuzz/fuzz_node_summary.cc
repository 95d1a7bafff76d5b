// Node summaries (nodes/<host>.json): the fast (simdjson) reader the report uses never crashes
// on arbitrary bytes; where it and the common (nlohmann) reader both accept an input they give
// the same summary; what the common reader accepts survives write -> read -> write, and the
// fast reader reads the writer's output exactly as the common one does, with or without its
// stack tree.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_roundtrip.h"
#include "hangwatch/common/node_summary.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/dumpio/node_summary_fast_reader.h"

namespace {

hangwatch::Expected<hangwatch::dumpio::NodeSummaryRead> fastRead(std::string_view text, bool tree) {
  std::string padded(text);
  padded.resize(text.size() + hangwatch::dumpio::kFastReaderPadding, '\0');
  hangwatch::dumpio::NodeSummaryReadOptions options;
  if (!tree) options.need_tree = [](const hangwatch::NodeSummary&) { return false; };
  return hangwatch::dumpio::nodeSummaryFromPaddedText(std::string_view(padded.data(), text.size()), options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto fast = fastRead(text, true);
  auto slow = hangwatch::nodeSummaryFromText(text);
  if (fast && slow)
    hangwatch::fuzz::requireSame(hangwatch::toJson(*slow), hangwatch::toJson(fast->summary), "fast vs common node summary reader");
  (void)fastRead(text, false);
  if (!slow) return 0;
  const nlohmann::json written = hangwatch::toJson(*slow);
  auto reread = hangwatch::nodeSummaryFromText(written.dump());
  if (!reread) {
    std::fprintf(stderr, "node summary: own output rejected: %s\n", reread.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(*reread), "node summary");
  auto fast_canonical = fastRead(written.dump(), true);
  if (!fast_canonical || !fast_canonical->tree_read) {
    std::fprintf(stderr, "fast reader rejected the writer's output: %s\n",
                 fast_canonical ? "tree not read" : fast_canonical.error().c_str());
    std::abort();
  }
  hangwatch::fuzz::requireSame(written, hangwatch::toJson(fast_canonical->summary), "fast node summary reader vs common reader");
  auto without_tree = fastRead(written.dump(), false);
  if (!without_tree || (!slow->tree.empty() && without_tree->tree_read)) std::abort();
  hangwatch::NodeSummary no_tree = *slow;
  no_tree.tree.clear();
  hangwatch::fuzz::requireSame(hangwatch::toJson(no_tree), hangwatch::toJson(without_tree->summary), "tree skipped");
  return 0;
}
