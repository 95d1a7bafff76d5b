#pragma once
// Runs a debugger (gdb on simgpu, cuda-gdb on GPUs) in batch mode against a live
// process with one script from gdb-scripts/, under a hard time bound. On expiry the
// debugger is killed, and if its attach left the target group-stopped (a pending
// SIGSTOP from PTRACE_ATTACH) while it was running before, the target gets SIGCONT;
// a target stopped by someone else before we came is never continued.
#include <sys/types.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hangwatch/expected.h"
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

class DebuggerSession {
 public:
  explicit DebuggerSession(WaitManager& waits) : waits_(waits) {}

  // `configured` ($HANGWATCH_DEBUGGER) if set, else cuda-gdb on PATH, else gdb on PATH.
  static Expected<std::string> locate(const char* configured);
  static bool isCudaGdb(const std::string& debugger);
  // Scripts ship in gdb-scripts/; $HANGWATCH_GDB_SCRIPTS overrides the folder.
  static std::string scriptPath(const std::string& name);
  // The scripts folder of the collector at `exe`: the installed one relative to it
  // (a moved prefix keeps working), else the source tree's it was built from.
  static std::string scriptsDirFor(const std::string& exe);

  Expected<DebuggerRun> run(const std::string& debugger, pid_t pid, const std::string& script, Deadline deadline);

 private:
  WaitManager& waits_;
};

}  // namespace hangwatch::forensics
