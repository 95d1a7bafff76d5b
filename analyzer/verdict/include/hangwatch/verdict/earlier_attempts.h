#pragma once
// What the earlier launches of a restarted job tell about this one: the unique ids their ranks
// made. A rank of this launch inside init with one of them read an id whose bootstrap root died
// with its launch (a store the launcher kept across restarts).
#include <string>
#include <vector>

#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

// Ids some rank is joining with that no rank of this launch made.
std::vector<std::string> idsJoinedButNotMade(const JobData& job);

// Reads the watchdog snapshots of `earlier` (attempt folders, oldest first, with their names)
// for the ids their ranks made, and notes in job.ids_made_earlier those this launch joins with
// but did not make. Reads nothing when there are none.
struct EarlierAttempt {
  std::string name;
  std::string dir;
};
void noteIdsMadeEarlier(JobData& job, const std::vector<EarlierAttempt>& earlier);

}  // namespace hangwatch::verdict
