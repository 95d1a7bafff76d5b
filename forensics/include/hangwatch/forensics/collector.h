#pragma once
// One collection of one rank: /proc pass, fast ptrace pass (native stacks + Python
// stacks while the threads are stopped, then detach), debugger phase, atomic dump.
// Every phase has a hard deadline; whatever happens the target is left as it was.
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "hangwatch/forensics/proc_snapshot.h"
#include "hangwatch/forensics/ras_client.h"
#include "hangwatch/common/forensics_dump.h"

namespace hangwatch::forensics {

struct CollectOptions {
  pid_t pid = 0;
  std::optional<int> rank;
  std::string out_dir;            // the job dir: the dump goes to <out_dir>/ranks/
  std::string backend = "auto";   // auto|cuda|sim|host
  double timeout_fast_s = 10;
  double timeout_debugger_s = 60;
  std::string debugger;           // $HANGWATCH_DEBUGGER; empty: the backend's (DebuggerSession::locateFor)
  // With a rank: record collecting/done in <out_dir>/ranks/rNNNNN.state.json, so the job
  // (abort mode) and the report know when this rank's dumps are complete, also if the
  // watchdog that started us is gone.
  bool mark_state = false;
  // The ranks of this node (the watchdog's node board): once this rank is done, the node's
  // last collector merges them into nodes/<host>.json (cli/node_summary_command.h). Empty: no merge.
  std::vector<int> node_ranks;
  // Ask NCCL's RAS (ras_client.h) for the job's communicators before stopping anything, when
  // this is the lowest rank of its node (or no node is given) and the process runs NCCL.
  bool ask_ras = true;
  size_t max_frames = 256;
  // Tests only: runs while every thread is held stopped, before unwinding.
  std::function<void()> while_stopped;
};

// Exit codes of `forensics collect`.
enum CollectExit : int {
  kCollectOk = 0,
  kCollectFailed = 1,    // no stacks: bad pid, zombie, permission, already traced, exited
  kCollectUsage = 2,
  kCollectDegraded = 3,  // stacks taken, a later phase (Python, debugger) failed
};

struct CollectResult {
  ForensicsDump dump;
  std::string dump_path;  // empty when nothing was written
  int exit_code = kCollectFailed;
  std::string summary;    // one line for the user
};

class Collector {
 public:
  explicit Collector(CollectOptions options) : options_(std::move(options)) {}
  CollectResult run();

 private:
  // Attach, unwind, read Python, detach. False when no stacks could be taken.
  bool fastPass(const ProcSnapshot& proc, std::map<int64_t, ThreadStack>& threads, CollectResult& result,
                bool& degraded);
  enum class DebuggerOutcome {
    kRead,    // the backend's debugger ran the script
    kPartly,  // it ran, but the backend's own debugger was missing (cuda under gdb): said in errors
    kFailed,  // no debugger at all, it failed, or it hit its time bound
  };
  DebuggerOutcome debuggerPhase(ForensicsDump& dump);
  // The fast pass unless the process is a zombie; the threads into the dump. True when
  // stacks were taken from a process still alive.
  bool takeStacks(const ProcSnapshot& proc, std::map<int64_t, ThreadStack> threads, CollectResult& result,
                  bool& degraded);
  // The lowest rank of --node, or a collector told no rank or node: it asks NCCL's RAS and may
  // fill the debugger's index cache, once per node.
  bool isNodesFirstRank() const;
  // The "ras" phase: NCCL's RAS asked, once per node, before any thread is stopped (null when
  // not asked); its answer taken into the dump once this collector is done with the process.
  std::unique_ptr<RasQuestion> askNcclRas(const ProcSnapshot& proc, ForensicsDump& dump);
  void takeRasAnswer(RasQuestion& question, ForensicsDump& dump);
  // Picks the backend, then runs its debugger when there is one and the fast pass attached.
  void readRingProgress(const ProcSnapshot& proc, bool stacks_ok, bool& degraded, ForensicsDump& dump);
  // Writes the dump, sets the exit code and summary, and records the outcome in the state file.
  void finish(CollectResult& result, bool stacks_ok, bool degraded);
  // Rewrites the rank's state file, keeping what the watchdog wrote there (pid, deadline).
  void markState(bool done, const std::string& forensics, const std::string& note);

  CollectOptions options_;
};

// Which backend `auto` means for this process, decided once from its mappings: "sim" when
// simgpu (libsimnccl/libsimcuda) is mapped, "cuda" when the real libnccl.so.2 or
// libcuda.so.1 is, else "host" (no ring reader: nothing for a debugger to read).
std::string resolveBackend(const std::string& requested, bool maps_simgpu, bool maps_cuda);

// Whether simgpu is in the process: under its own names, or under the real sonames (its
// drop-in folder: libcudart.so.13 and libnccl.so.2 that are simgpu's), told by what the
// mapped library defines, not by what it is called.
bool mapsSimgpu(const ProcSnapshot& proc);

}  // namespace hangwatch::forensics
