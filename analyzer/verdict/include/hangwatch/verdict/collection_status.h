#pragma once
// Which ranks' collectors are still at work, from ranks/rNNNNN.state.json (DESIGN.md §4):
// what `report --wait` waits for and what the report lists as ranks_collecting.
#include <string>
#include <vector>

#include "hangwatch/common/rank_state.h"

namespace hangwatch::verdict {

// A rank whose state says collecting counts until its deadline passes; on this host also only
// while its collector (or, before the collector started, the rank itself) is alive.
bool stillCollecting(const RankState& s, double now_unix_s, const std::string& this_host);

struct CollectionStatus {
  std::vector<int> collecting;        // ascending
  double latest_deadline_unix_s = 0;  // of those still collecting
};

// The state files of `ranks` (a rank without one is not collecting).
CollectionStatus readCollectionStatus(const std::string& job_dir, double now_unix_s, const std::vector<int>& ranks);

double wallClockNow();

}  // namespace hangwatch::verdict
