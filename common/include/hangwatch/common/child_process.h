#pragma once
// The one way hangwatch starts a process (the watchdog its collector, the collector its
// debugger), on Boost.Process: stdin from /dev/null, stdout and stderr together into a
// file or a pipe, no other fd of ours, and a session of its own, so a time bound can kill it
// with all it started.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/scoped_fd.h"

namespace boost::process {
class child;
}

namespace hangwatch {

struct ChildCommand {
  std::string exe;
  std::vector<std::string> args;  // after argv[0], which is `exe`
  std::vector<std::string> unset_env;
  std::vector<std::pair<std::string, std::string>> set_env;  // over this process's environment
  std::string output_path;  // stdout+stderr into this file; empty: into a pipe, see readOutput
};

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  static Expected<ChildProcess> start(const ChildCommand& command);
  // Never kills: a child still running is left to run (and to whoever reaps it).
  ~ChildProcess();
  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;

  pid_t pid() const { return pid_; }

  // The piped output until EOF (true) or the deadline (false); `out` keeps its last `limit` bytes.
  bool readOutput(Clock::time_point deadline, std::string& out, size_t limit);
  // Polls until the child exits (its exit code, and it is reaped), the deadline passes or
  // `give_up` says so (nothing: still running). For callers that own no other children;
  // a ptrace holder reaps with its WaitManager instead.
  std::optional<int> waitUntil(Clock::time_point deadline, const std::function<bool()>& give_up = {});
  // SIGKILL to the child's whole session.
  void killSession();

 private:
  ChildProcess(std::unique_ptr<boost::process::child> child, ScopedFd output);

  std::unique_ptr<boost::process::child> child_;
  ScopedFd output_;
  pid_t pid_ = -1;
};

}  // namespace hangwatch
