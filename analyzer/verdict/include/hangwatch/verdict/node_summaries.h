#pragma once
// Node summaries (common/node_summary.h, nodes/<host>.json): built on a node from its ranks'
// files with the report's own reader, so a rank's record is what the report would have read,
// and read back into the report's RankSummaries with the stacks interned into the job's table.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/node_summary.h"
#include "hangwatch/stackmerge/stack_table.h"
#include "hangwatch/verdict/rank_summary.h"

namespace hangwatch::verdict {

class NodeSummaryBuilder {
 public:
  // The summary of one node's `ranks` as their files stand now: a rank whose state says its
  // dumps are done is covered (its record read as the report reads it), any other is lacked.
  static NodeSummary build(const std::string& job_dir, const std::string& host, const std::vector<int>& ranks,
                           double now_unix_s);
  // Writes it atomically to nodes/<host>.json; the path written.
  static Expected<std::string> write(const std::string& job_dir, const NodeSummary& summary);
};

// Reads node summaries for one job; loader threads share one. A stack class it has seen once
// (by its digest) is never read from a tree again.
class NodeSummaryReader {
 public:
  explicit NodeSummaryReader(stackmerge::StackTable& stacks) : stacks_(stacks) {}

  struct Node {
    std::string path;
    std::string problem;  // why the file was not used; empty when it was
    std::vector<RankSummary> ranks;  // the covered ranks, their threads' stacks in the job's table
    std::vector<CoveredFiles> files;  // the files each was read from
  };
  Node read(const std::string& path);

 private:
  stackmerge::StackTable& stacks_;
  std::mutex mutex_;
  std::unordered_map<std::string, uint32_t> by_digest_;
};

// The node summaries of a job folder (nodes/*.json), sorted.
std::vector<std::string> listNodeSummaries(const std::string& job_dir);

}  // namespace hangwatch::verdict
