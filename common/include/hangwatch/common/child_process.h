#pragma once
// The one way hangwatch starts a process (the watchdog its collector, the collector its
// debugger), on plain libc so the preloaded library needs no other library: stdin from
// /dev/null, stdout and stderr together into a file or a pipe, no other fd of ours, and a
// session of its own, so a time bound can kill it with all it started.
#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch {

struct ChildCommand {
  std::string exe;  // a path, not searched on PATH (see findExecutableOnPath)
  std::vector<std::string> args;  // after argv[0], which is `exe`
  std::vector<std::string> unset_env;
  std::vector<std::pair<std::string, std::string>> set_env;  // over this process's environment
  std::string output_path;  // stdout+stderr into this file (emptied first); empty: into a pipe, see readOutput
  mode_t output_mode = 0600;  // the file's mode, whatever the umask (a dump folder's: dumpFileMode())
  // SIGTERM blocked in the child and in whatever it starts (the mask survives exec): a
  // launcher that ends a job signals every process of it (Slurm the whole step, by process
  // tree or cgroup), and a collector must finish within its own deadlines instead. SIGKILL,
  // and its parent's time bound, still end it.
  bool hold_term = false;
  // Given to the child as its fd 3 (a socket to talk to it over); -1: none.
  int pass_fd = -1;
  // A signal to the child when the thread that started it ends (PR_SET_PDEATHSIG): a helper
  // that must not outlive the process it serves. SIGKILL ends it even when it is blocked in
  // the kernel; a helper that handles another one can finish what it was doing first.
  bool die_with_parent = false;
  int parent_death_signal = SIGKILL;
};

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Returns once the child runs `exe` (an exec that fails is an error, not an exit code).
  // Starts it with vfork: no copy of a large training process's page tables, no
  // pthread_atfork handlers of the job's libraries, and no fork failure under strict overcommit.
  static Expected<ChildProcess> start(const ChildCommand& command);
  // Never kills: a child still running is left to run (and to whoever reaps it).
  ~ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;

  pid_t pid() const { return pid_; }

  // The piped output until EOF (true) or the deadline (false); `out` keeps its last `limit` bytes.
  bool readOutput(Clock::time_point deadline, std::string& out, size_t limit);
  // Polls until the child exits (its exit code, or the signal that ended it, and it is
  // reaped), the deadline passes or `give_up` says so (nothing: still running). For callers
  // that own no other children; a ptrace holder reaps with its WaitManager instead.
  std::optional<int> waitUntil(Clock::time_point deadline, const std::function<bool()>& give_up = {});
  // SIGKILL to the child's whole session.
  void killSession();

 private:
  ChildProcess(pid_t pid, ScopedFd output) : output_(std::move(output)), pid_(pid) {}

  ScopedFd output_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;  // once reaped
};

// Marks every fd above 2 close-on-exec, async-signal-safe (the child calls it between vfork
// and exec): close_range (Linux >= 5.11), else the fds /proc/self/fd lists, else every fd
// below RLIMIT_NOFILE. `first` skips the earlier ways (for their tests); returns the way used.
enum class CloseOnExecWay { kCloseRange, kProcFdList, kEveryPossibleFd };
CloseOnExecWay markFdsAboveStdioCloseOnExec(CloseOnExecWay first = CloseOnExecWay::kCloseRange);

// The first regular executable file `name` in $PATH's folders (/usr/bin:/bin without PATH).
std::optional<std::string> findExecutableOnPath(const std::string& name);

}  // namespace hangwatch
