#pragma once
// A SIGTERM from the launcher (srun at a time limit, `scancel`, `--kill-on-bad-exit` after one
// rank failed; torchrun's agent; mpirun) is held back while the poller decides what it means:
// with GPU communication pending it is the end of a hung job, and the rank dumps before the
// signal goes on (watchdog.h); with none, it goes on at the poller's next pass (at most 50 ms
// later). While a rank dumps, a SIGTERM waits until its snapshot is whole and its collector
// done. Going on means: the job's own disposition restored and the signal sent again, so the
// process ends as it would have.
//
// Armed from the watchdog's start. In a forked child (no poller there) and once released, a
// SIGTERM goes straight to the job's own action. A job that installs its own SIGTERM handler
// after hangwatch started (Python's signal.signal) replaces the hold: its handler runs at once.
namespace hangwatch::watchdog {

class TermDeferral {
 public:
  // A held SIGTERM goes on at the latest this long after it arrived, whatever holds it (a
  // thread of hangwatch's blocked on a stalled dump folder): longer than the responder's own
  // hold (HangResponder::kTermHoldS, 20 s), shorter than Slurm's and torchrun's 30 s to SIGKILL.
  static constexpr double kHoldBoundS = 25;

  // Installs the holding handler for this process, remembering the job's own action, and the
  // thread that enforces the bound (the first call's). Idempotent.
  static void arm(double hold_bound_s = kHoldBoundS);
  // A SIGTERM arrived while armed.
  static bool pending();
  // Seconds since the first held-back SIGTERM; 0 when none.
  static double pendingForSeconds();
  // Restores the job's action and re-sends a held-back SIGTERM to this process.
  static void release();
  // Whether release() would end the process: a SIGTERM is held and the job's own action for it
  // is the default one (no handler of the job's, before or since).
  static bool releaseEndsProcess();
};

}  // namespace hangwatch::watchdog
