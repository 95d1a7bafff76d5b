#pragma once
// Whether every rank of the job has finished dumping, from the ranks' state files
// (ranks/rNNNNN.state.json). One process per job (launcher rank 0) asks, paced by the
// caller, and announces the answer in TRIGGER.beacon, so every other node learns it with the
// one look-up it makes anyway. A rank's file is read until it says done; then never again.
#include <string>
#include <vector>

namespace hangwatch::watchdog {

class JobCompletion {
 public:
  JobCompletion(std::string job_dir, int world_size);

  // One pass over the ranks not yet settled, in rank order, stopping at the first that is still
  // collecting (or has written nothing yet). True once every rank is done or past its deadline.
  bool poll(double now_unix_s);
  int ranksDone() const { return done_; }
  int ranksGivenUp() const { return given_up_; }
  int worldSize() const { return world_size_; }
  // The first rank still waited for; world size when none.
  int waitingFor() const { return cursor_; }

 private:
  std::string job_dir_;
  int world_size_;
  int cursor_ = 0;
  int done_ = 0;
  int given_up_ = 0;
};

}  // namespace hangwatch::watchdog
