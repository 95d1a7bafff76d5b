#pragma once
// Reads a job directory (DESIGN.md §4) into JobData: ranks in parallel, one thread per
// core, each rank reduced to a RankSummary as soon as it is parsed. A node summary
// (nodes/<host>.json) stands for the rank files of the ranks it covers: the same JobData from
// one file per node.
#include <functional>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

struct LoadOptions {
  bool node_summaries = true;  // false: every rank from its own files (report --flat)
  // Called once the node summaries are read, with the listed ranks none covers, before their
  // files are read (report --wait waits there for their collectors); true: it waited, and the
  // rank files are listed again.
  std::function<bool(const std::vector<int>& uncovered)> before_rank_files;
};

class JobLoader {
 public:
  explicit JobLoader(unsigned threads = 0, LoadOptions options = {})  // 0: one per core
      : threads_(threads), options_(std::move(options)) {}
  // An error only when `job_dir` is not a readable directory; bad files become problem notes.
  Expected<JobData> load(const std::string& job_dir) const;

 private:
  unsigned threads_;
  LoadOptions options_;
};

}  // namespace hangwatch::verdict
