#pragma once
// What the report keeps of one rank's dumps (common/rank_record.h) and what the report made of
// it: the parsed JSON is dropped as soon as a rank is read, so 131,072 ranks fit in memory.
// Passive data; JobLoader fills it, the analyses read it.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/rank_record.h"
#include "hangwatch/stackmerge/stack_table.h"

namespace hangwatch::verdict {

// NCCL's commHash as the snapshot writes it (comms[].nccl_id, 16 hex digits) -> its value;
// 0 for anything else.
uint64_t ncclIdValue(const std::string& hex);

using ::hangwatch::CollAlgorithmUse;
using ::hangwatch::KernelChannelState;
using ::hangwatch::ProxyEnd;

// Each thread's stack is an id in JobData::stacks: ranks share a few hundred distinct stacks.
struct RankSummary : RankRecord {
  bool collecting = false;  // its collector was still at work when the report was made
  // Set when the report's ranks are GPU ranks (gpu_ranks.h): the launcher's rank of the process
  // that drives this GPU. The rank files, TRIGGER.json and metrics are named by it.
  std::optional<int> launcher_rank;

  bool answered() const { return has_snapshot || has_forensics; }
  // Why this rank's data is short of complete, for the verdict to name; empty when complete
  // (a snapshot, and a forensics dump with ring progress on `comm`).
  std::string lacking(const std::string& comm) const;
};

}  // namespace hangwatch::verdict
