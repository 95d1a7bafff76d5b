#pragma once
// forensics node-summary <job-dir> --ranks R [--host H] [--wait-until T] | --all: merges one
// node's rank files into nodes/<host>.json (common/node_summary.h), as the node's last
// collector does after `collect --node`, so that `report` opens one file per node.
#include <ostream>
#include <string>
#include <vector>

#include "hangwatch/forensics/cli/command.h"

namespace hangwatch::forensics {

class NodeSummaryCommand : public Command {
 public:
  NodeSummaryCommand() : Command("node-summary", "merge one node's rank files into nodes/<host>.json") {}
  std::string usage() const override;
  int run(const std::vector<std::string>& args) override;
};

// What `collect --node RANKS` does once this rank's dumps are done: when every rank of the
// node is settled (done, or past its deadline), writes the node summary; otherwise the first
// collector of the node to get here starts `node-summary --wait-until` (detached) to write it
// when the last one settles or the latest deadline passes, so a collector that dies still
// leaves its node summarised. Never fails the collection: problems go to `log`.
void summarizeNodeAfterCollect(const std::string& job_dir, const std::vector<int>& node_ranks, std::ostream& log);
// The file in node-local shared memory whose creation (O_EXCL) makes a collector the node's waiter.
std::string nodeSummaryWaiterClaim(const std::string& job_dir, const std::string& host);

}  // namespace hangwatch::forensics
