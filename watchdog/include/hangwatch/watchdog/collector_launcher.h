#pragma once
// Starts `forensics collect --pid <self> ...` through ChildProcess: no shell, its
// own session, output to a log file in the job directory, and a bounded wait so
// a stuck collector can never keep this rank's watchdog from finishing.
#include <sys/types.h>

#include <functional>
#include <string>

#include "hangwatch/common/expected.h"

namespace hangwatch::watchdog {

struct CollectorRequest {
  std::string binary;
  pid_t pid = 0;
  int rank = -1;          // -1: no --rank
  std::string job_dir;
  std::string log_path;
  double wait_s = 120;
  // The collector's debugger phase is bounded to fit `wait_s` (debuggerBoundFor): a lowered
  // HANGWATCH_COLLECT_WAIT shortens the collection instead of leaving it running unwatched.
  std::string debugger;   // HANGWATCH_DEBUGGER, kept in the collector's environment
  bool mark_state = false;  // the collector records collecting/done in ranks/rNNNNN.state.json
  std::string node_ranks;   // this node's ranks ("0,1,2"): the last collector merges them; empty: no merge
  bool ask_ras = true;      // false: --no-ras (HANGWATCH_ASK_RAS=0)
  // Polled while waiting: true stops the wait early (the collector runs on, detached).
  std::function<bool()> give_up;
};

// `forensics ras --pid <self> --rank R --out <job dir>`: NCCL's RAS asked for this node while no
// collector runs (HANGWATCH_COLLECT=0); the answer goes to ranks/rNNNNN.ras.json.
struct RasRequest {
  std::string binary;
  pid_t pid = 0;
  int rank = -1;
  std::string job_dir;
  std::string log_path;
  double bound_s = 20;  // the command's own bound on the answer; waited for 5 s longer
  std::function<bool()> give_up;
};

struct CollectorOutcome {
  bool finished = false;  // false: still running when the wait expired (left running)
  int exit_code = -1;
  pid_t pid = 0;          // the collector's process
};

class CollectorLauncher {
 public:
  // forensics collect's own hard bounds (10 s ptrace pass, 60 s debugger) plus start-up and
  // writing: a collection still running after this is not coming back.
  static constexpr double kCollectorBoundS = 90;
  static constexpr double kFastPhaseBoundS = 10;
  static constexpr double kDebuggerBoundS = 60;
  // The debugger phase's bound for a collector waited for `wait_s`: what is left after the
  // fast phase and 5 s of start-up and writing, between 5 s and the collector's own 60 s.
  static double debuggerBoundFor(double wait_s);

  // HANGWATCH_FORENSICS if set, else next to libhangwatch.so in the build or install
  // tree, else PATH. Empty when not found.
  static std::string findForensicsBinary(const std::string& configured);
  // The collector that belongs to a libhangwatch.so in `library_dir`: the build tree's,
  // or the installed one at the same relative place as in the install layout, wherever
  // the prefix was moved to. Empty when there is none.
  static std::string forensicsNextTo(const std::string& library_dir);

  Expected<CollectorOutcome> run(const CollectorRequest& request);
  Expected<CollectorOutcome> askRas(const RasRequest& request);

  // Yama (ptrace_scope 1) lets a process be traced by its ancestors and by the one tracer it
  // names with PR_SET_PTRACER, with that tracer's descendants. Naming `tracer` here: this
  // process's own pid before the collector exists (its descendants, the collector to be among
  // them), the collector's once it runs (it and its debugger alone). Never PR_SET_PTRACER_ANY:
  // another process of the same user must not attach. False where the kernel has no Yama.
  static bool allowTracer(pid_t tracer);
};

}  // namespace hangwatch::watchdog
