#include "hangwatch/watchdog/job_completion.h"

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"

namespace hangwatch::watchdog {

JobCompletion::JobCompletion(std::string job_dir, int world_size, double answer_window_s)
    : job_dir_(std::move(job_dir)), world_size_(world_size), answer_window_s_(answer_window_s) {}

bool JobCompletion::poll(double now_unix_s) {
  if (first_poll_unix_s_ == 0) first_poll_unix_s_ = now_unix_s;
  while (cursor_ < world_size_) {
    const std::string path = rankStatePath(job_dir_, cursor_);
    Expected<RankState> state = readRankState(path);
    if (!state && !dumpFs().stat(path) && now_unix_s - first_poll_unix_s_ >= answer_window_s_) {
      ++silent_;
      ++given_up_;
      ++cursor_;
      continue;
    }
    if (!state || !state->settled(now_unix_s)) return false;
    if (state->done()) ++done_;
    else ++given_up_;
    ++cursor_;
  }
  return true;
}

}  // namespace hangwatch::watchdog
