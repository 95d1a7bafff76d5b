#include "hangwatch/watchdog/job_completion.h"

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"

namespace hangwatch::watchdog {

JobCompletion::JobCompletion(std::string job_dir, int world_size)
    : job_dir_(std::move(job_dir)), world_size_(world_size) {}

bool JobCompletion::poll(double now_unix_s) {
  while (cursor_ < world_size_) {
    Expected<RankState> state = readRankState(rankStatePath(job_dir_, cursor_));
    if (!state || !state->settled(now_unix_s)) return false;
    if (state->done()) ++done_;
    else ++given_up_;
    ++cursor_;
  }
  return true;
}

}  // namespace hangwatch::watchdog
