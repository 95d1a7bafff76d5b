#pragma once
// While a rank dumps, a SIGTERM from the launcher (torchrun, mpirun, srun killing the job
// after one rank failed) is held back, so the snapshot is written whole and the collector can
// finish reading the live process; then the job's own disposition is restored and the signal
// sent again. Armed only during dumping: the rest of the time the job's handlers are untouched.
namespace hangwatch::watchdog {

class TermDeferral {
 public:
  // Installs the holding handler, remembering the job's own action. Idempotent.
  static void arm();
  // A SIGTERM arrived while armed.
  static bool pending();
  // Seconds since the first held-back SIGTERM; 0 when none.
  static double pendingForSeconds();
  // Restores the job's action and re-sends a held-back SIGTERM to this process.
  static void release();
};

}  // namespace hangwatch::watchdog
