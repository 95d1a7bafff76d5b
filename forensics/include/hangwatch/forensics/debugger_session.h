#pragma once
// Runs a debugger (gdb on simgpu, cuda-gdb on GPUs) in batch mode against a live
// process with one script from gdb-scripts/, under a hard time bound. On expiry the
// debugger is killed, and if its attach left the target group-stopped (a pending
// SIGSTOP from PTRACE_ATTACH) while it was running before, the target gets SIGCONT;
// a target stopped by someone else before we came is never continued.
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/forensics/wait_manager.h"

namespace hangwatch::forensics {

struct DebuggerRun {
  std::string debugger;
  bool timed_out = false;
  int exit_code = -1;            // -1 when killed
  std::string output;            // stdout+stderr, last 64 KiB
  std::optional<nlohmann::json> report;  // what the script printed between its markers
  bool continued_target = false;  // we sent SIGCONT to undo a stop our debugger left
  std::string target_state_after;
};

// The debugger a backend gets, and what it cannot do there (empty when nothing is missing).
struct DebuggerChoice {
  std::string path;
  bool cuda_gdb = false;
  std::string shortfall;  // e.g. the cuda backend under gdb: no kernel registers, no device memory
};

class DebuggerSession {
 public:
  explicit DebuggerSession(WaitManager& waits) : waits_(waits) {}

  // `configured` ($HANGWATCH_DEBUGGER) if set, else cuda-gdb on PATH, else gdb on PATH.
  static Expected<std::string> locate(const char* configured);
  // The debugger for `backend` ("sim" or "cuda"), decided from the process, not from PATH
  // alone: `configured` if set; sim: gdb (cuda-gdb also debugs host code); cuda: cuda-gdb,
  // else gdb with a shortfall (NCCL's host structures only). An error names what is missing.
  static Expected<DebuggerChoice> locateFor(const std::string& backend, const char* configured);
  static bool isCudaGdb(const std::string& debugger);
  // Scripts ship in gdb-scripts/; $HANGWATCH_GDB_SCRIPTS overrides the folder.
  static std::string scriptPath(const std::string& name);
  // The scripts folder of the collector at `exe`: the installed one relative to it
  // (a moved prefix keeps working), else the source tree's it was built from.
  static std::string scriptsDirFor(const std::string& exe);
  // Where the debugger keeps its index cache (gdb's `set index-cache`): the DWARF index of every
  // library and program it reads, filed by build id, so a later collection on this node (the
  // next hang, the restarted job) reads symbols in about half the time. Node-local and this
  // user's own: `tmpdir` ($TMPDIR)/hangwatch-gdb-index-<uid>, else /var/tmp/...
  // - `fills`: this debugger may write the first index (the folder is made 0700 here). Every
  //   other one uses the cache only once something is in it: the node's ranks collect at once,
  //   and eight debuggers writing the same index cost 40 % more than none.
  // - None (no cache) unless it is a folder, not a link, owned by this user, that nobody else
  //   can write: a planted index would make the debugger read the wrong addresses.
  static std::optional<std::string> indexCacheDir(const char* tmpdir, bool fills);
  // The commands (-iex, before the attach) that turn the cache on in `dir`.
  static std::vector<std::string> indexCacheCommands(const std::string& dir);

  // `env`: variables set for the debugger (and the script it runs), on top of ours;
  // `before_attach`: debugger commands run before it attaches (-iex).
  Expected<DebuggerRun> run(const std::string& debugger, pid_t pid, const std::string& script, Deadline deadline,
                            const std::vector<std::pair<std::string, std::string>>& env = {},
                            const std::vector<std::string>& before_attach = {});

 private:
  WaitManager& waits_;
};

}  // namespace hangwatch::forensics
