#pragma once
// Every waitpid of the collector goes through one WaitManager: the stops of the
// threads it traces and the exit of the debugger it starts.
//
// Why one owner: a status that waitpid returned is gone for good, and once an exited
// child (or traced thread) has been reaped its number can be handed to a new,
// unrelated process. Whoever still holds that number must learn "reaped" from here
// instead of waiting on or signalling a stranger.
#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>

namespace hangwatch::forensics {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct WaitStatus {
  enum class Kind {
    kStopped,   // a ptrace stop: event stop, group stop or signal-delivery stop
    kExited,    // exited normally (code in `code`)
    kKilled,    // killed by signal `signal`
    kTimedOut,  // nothing happened before the deadline; the pid is still ours
    kNotOurs,   // ECHILD: neither our child nor traced by us (or already reaped)
  };
  Kind kind = Kind::kTimedOut;
  int code = 0;
  int signal = 0;      // stop signal, or the killing signal
  int ptrace_event = 0;  // PTRACE_EVENT_* of a stop, 0 for a signal-delivery stop
  int raw = 0;

  bool stopped() const { return kind == Kind::kStopped; }
  bool gone() const { return kind == Kind::kExited || kind == Kind::kKilled || kind == Kind::kNotOurs; }
  // A signal-delivery stop holds a signal meant for the target: it must be handed back on detach.
  int signalToReinject() const { return stopped() && ptrace_event == 0 ? signal : 0; }
  std::string describe() const;
};

class WaitManager {
 public:
  // Waits for the next state change of `pid` (a traced thread or a child), up to `deadline`.
  WaitStatus waitFor(pid_t pid, Deadline deadline);
  // True once waitFor has seen `pid` exit: its number may already belong to someone else.
  bool reaped(pid_t pid) const { return reaped_.count(pid) != 0; }

 private:
  std::set<pid_t> reaped_;
};

}  // namespace hangwatch::forensics
