#pragma once
// Everything the three report formats show: the verdict, the data behind it, and the
// ranks grouped by stack class. Passive; ReportBuilder makes it, the *ReportWriter classes print it.
#include <optional>
#include <vector>

#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/stackmerge/stack_classifier.h"
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/sequence_analysis.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

// The ranks one machine holds, as the snapshots name it (NCCL's nodes: links between them are
// network links).
struct NodeRanks {
  std::string host;
  stackmerge::RankSet ranks;
};

struct Report {
  JobData job;
  Verdict verdict;
  std::optional<HangFocus> focus;
  std::vector<stackmerge::StackClass> stack_classes;  // largest first
  std::vector<int> rank_class;  // per rank in [0, world_size): index into stack_classes, -1 without stacks
  std::vector<int> ring_order;  // global ranks of the focus communicator in ring order (channel 0)
  std::vector<NodeRanks> nodes;  // by first rank; ranks without a snapshot are in none
};

// The host of `rank` as its snapshot names it; "" when unknown.
std::string hostOf(const JobData& job, int rank);
// "node-1", or "node-0 -> node-1" for a link; "" when no host is known.
std::string hostsText(const Suspect& s);

// Host, GPU and pid of a rank, as evidence sentences name it: "rank 2 (host a, GPU 2, pid 77)".
std::string describeRank(const JobData& job, int rank);

}  // namespace hangwatch::verdict
