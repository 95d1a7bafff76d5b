#pragma once
// A job whose dumps are split: ranks whose dump folder failed or stalled wrote to their node's
// fallback folder (HANGWATCH_FALLBACK_DIR, watchdog/dump_storage.h) with the same layout.
// `forensics report --fallback` reads them together through a merged view: a temporary
// folder of links to each file, the newest copy of a file where both have one, and the
// metrics lines of both, in order.
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"

namespace hangwatch::forensics {

// Each fallback folder's job folder: DIR itself, or DIR/<job-id> when DIR is the fallback root.
std::string fallbackJobFolder(const std::string& dir, const std::string& job_dir);

class MergedDumps {
 public:
  // Merges `job_dir` (may be missing) with `fallbacks` (job folders); removed with the object.
  static Expected<MergedDumps> make(const std::string& job_dir, const std::vector<std::string>& fallbacks);
  MergedDumps(MergedDumps&& other) noexcept;
  MergedDumps& operator=(MergedDumps&&) = delete;
  ~MergedDumps();

  // The merged job folder (named as the job's own, so the job id reads the same).
  const std::string& dir() const { return dir_; }
  // A path of the merged view as it is in the job's own folder.
  std::string original(const std::string& merged_path) const;
  // What came from where: one sentence per fallback folder that held files.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  MergedDumps() = default;
  std::string root_;  // the temporary folder, removed at the end
  std::string dir_;
  std::string job_dir_;
  std::vector<std::string> notes_;
};

}  // namespace hangwatch::forensics
