#pragma once
// Reads one rank's ranks/rNNNNN.watchdog.json and ranks/rNNNNN.forensics.json into a
// RankSummary. Never fails: a missing, truncated or corrupt file becomes a problem note.
#include <string>
#include <string_view>

#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/rank_summary.h"

namespace hangwatch::verdict {

class RankDumpReader {
 public:
  // Thread stacks go into `stacks` (the job's table), shared by every loader thread.
  static RankSummary read(const std::string& job_dir, int rank, stackmerge::StackTable& stacks,
                          Stage stage = Stage::kHang);
  // One file's text into `s`; what read() does per file, open to tests.
  static void addSnapshotText(RankSummary& s, std::string_view text);
  // addSnapshotText without its copy: dumpio::kFastReaderPadding bytes must be
  // readable after `text`.
  static void addPaddedSnapshotText(RankSummary& s, std::string_view text);
  static void addForensicsText(RankSummary& s, const std::string& text, stackmerge::StackTable& stacks);
  // addForensicsText without its copy: dumpio::kFastReaderPadding bytes must be
  // readable after `text`.
  static void addPaddedForensicsText(RankSummary& s, std::string_view text, stackmerge::StackTable& stacks);
};

}  // namespace hangwatch::verdict
