#include "hangwatch/forensics/wait_manager.h"

#include <sys/ptrace.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace hangwatch::forensics {
namespace {

WaitStatus decode(int raw) {
  WaitStatus s;
  s.raw = raw;
  if (WIFSTOPPED(raw)) {
    s.kind = WaitStatus::Kind::kStopped;
    s.signal = WSTOPSIG(raw);
    s.ptrace_event = (raw >> 16) & 0xff;
  } else if (WIFEXITED(raw)) {
    s.kind = WaitStatus::Kind::kExited;
    s.code = WEXITSTATUS(raw);
  } else if (WIFSIGNALED(raw)) {
    s.kind = WaitStatus::Kind::kKilled;
    s.signal = WTERMSIG(raw);
  }
  return s;
}

}  // namespace

std::string WaitStatus::describe() const {
  switch (kind) {
    case Kind::kStopped:
      return std::string("stopped (") + (ptrace_event ? "event stop, " : "signal ") + strsignal(signal) + ")";
    case Kind::kExited: return fmt::format("exited with code {}", code);
    case Kind::kKilled: return std::string("killed by ") + strsignal(signal);
    case Kind::kTimedOut: return "timed out";
    case Kind::kNotOurs: return "not our child or tracee";
  }
  return "?";
}

WaitStatus WaitManager::waitFor(pid_t pid, Deadline deadline) {
  if (reaped(pid)) return WaitStatus{WaitStatus::Kind::kNotOurs};
  // Polling with a short, growing sleep: a ptrace stop arrives within microseconds,
  // and polling needs no SIGCHLD handler that could disturb the caller.
  auto nap = std::chrono::microseconds(5);
  while (true) {
    int raw = 0;
    pid_t r = ::waitpid(pid, &raw, __WALL | WNOHANG);
    if (r == pid) {
      WaitStatus s = decode(raw);
      if (s.gone()) reaped_.insert(pid);
      return s;
    }
    if (r < 0 && errno != EINTR) {
      WaitStatus s{WaitStatus::Kind::kNotOurs};
      s.code = errno;
      return s;
    }
    if (Clock::now() >= deadline) return WaitStatus{WaitStatus::Kind::kTimedOut};
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
}

}  // namespace hangwatch::forensics
