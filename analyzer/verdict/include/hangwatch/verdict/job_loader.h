#pragma once
// Reads a job directory (DESIGN.md §4) into JobData: ranks in parallel, one thread per
// core, each rank reduced to a RankSummary as soon as it is parsed.
#include <string>

#include "hangwatch/common/expected.h"
#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

class JobLoader {
 public:
  explicit JobLoader(unsigned threads = 0) : threads_(threads) {}  // 0: one per core
  // An error only when `job_dir` is not a readable directory; bad files become problem notes.
  Expected<JobData> load(const std::string& job_dir) const;

 private:
  unsigned threads_;
};

}  // namespace hangwatch::verdict
