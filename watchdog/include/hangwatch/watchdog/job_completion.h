#pragma once
// Whether every rank of the job has finished dumping, from the ranks' state files
// (ranks/rNNNNN.state.json). One process per job (launcher rank 0) asks, paced by the
// caller, and announces the answer in TRIGGER.beacon, so every other node learns it with the
// one look-up it makes anyway. A rank's file is read until it says done; then never again.
// A rank that has written no state at all once the answer window has passed since the first
// poll (a live rank writes "collecting" within seconds of the trigger) is not waited for: it
// died alone on its node, or its node did, and nobody will ever write for it.
#include <string>
#include <vector>

namespace hangwatch::watchdog {

class JobCompletion {
 public:
  static constexpr double kAnswerWindowS = 30;

  JobCompletion(std::string job_dir, int world_size, double answer_window_s = kAnswerWindowS);

  // One pass over the ranks not yet settled, in rank order, stopping at the first that is still
  // collecting (or has written nothing yet, within the answer window). True once every rank is
  // done, past its deadline, or silent past the answer window.
  bool poll(double now_unix_s);
  int ranksDone() const { return done_; }
  int ranksGivenUp() const { return given_up_; }  // past their deadline, or silent
  int ranksSilent() const { return silent_; }
  int worldSize() const { return world_size_; }
  // The first rank still waited for; world size when none.
  int waitingFor() const { return cursor_; }

 private:
  std::string job_dir_;
  int world_size_;
  double answer_window_s_;
  double first_poll_unix_s_ = 0;
  int silent_ = 0;
  int cursor_ = 0;
  int done_ = 0;
  int given_up_ = 0;
};

}  // namespace hangwatch::watchdog
