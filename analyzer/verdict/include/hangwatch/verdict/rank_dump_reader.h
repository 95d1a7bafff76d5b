#pragma once
// Reads one rank's ranks/rNNNNN.watchdog.json and ranks/rNNNNN.forensics.json into a
// RankSummary. Never fails: a missing, truncated or corrupt file becomes a problem note.
#include <string>
#include <string_view>

#include "hangwatch/verdict/rank_summary.h"

namespace hangwatch::verdict {

class RankDumpReader {
 public:
  static RankSummary read(const std::string& job_dir, int rank);
  // One file's text into `s`; what read() does per file, open to tests.
  static void addSnapshotText(RankSummary& s, std::string_view text);
  static void addForensicsText(RankSummary& s, const std::string& text);
  // addForensicsText without its copy: stackmerge::kFastReaderPadding bytes must be
  // readable after `text`.
  static void addPaddedForensicsText(RankSummary& s, std::string_view text);
};

}  // namespace hangwatch::verdict
