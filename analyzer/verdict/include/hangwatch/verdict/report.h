#pragma once
// Everything the three report formats show: the verdict, the data behind it, and the
// ranks grouped by stack class. Passive; ReportBuilder makes it, the *ReportWriter classes print it.
#include <optional>
#include <vector>

#include "hangwatch/stackmerge/stack_classifier.h"
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/sequence_analysis.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

struct Report {
  JobData job;
  Verdict verdict;
  std::optional<HangFocus> focus;
  std::vector<stackmerge::StackClass> stack_classes;  // largest first
  std::vector<int> rank_class;  // per rank in [0, world_size): index into stack_classes, -1 without stacks
  std::vector<int> ring_order;  // global ranks of the focus communicator in ring order (channel 0)
};

// Host, GPU and pid of a rank, as evidence sentences name it: "rank 2 (host a, GPU 2, pid 77)".
std::string describeRank(const JobData& job, int rank);

}  // namespace hangwatch::verdict
