#pragma once
// A scoped ptrace attach to every thread of one process: PTRACE_SEIZE + PTRACE_INTERRUPT
// (no SIGSTOP is ever sent, so nothing is left pending for the target), and
// PTRACE_DETACH of every stopped thread when the session ends, on every path.
// A thread that was in a blocking syscall resumes it; a process that was
// group-stopped before we came stays stopped (the kernel re-enters the stop on detach).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/forensics/wait_manager.h"

namespace hangwatch::forensics {

struct TracedThread {
  pid_t tid = 0;
  bool stopped = false;      // in a ptrace stop now: registers and memory can be read
  bool exited = false;       // exited while we attached
  int reinject_signal = 0;   // caught in signal-delivery stop: handed back on detach
  uint64_t fs_base = 0;      // x86-64 thread pointer: glibc's pthread_t
  std::string error;         // why this thread could not be stopped
};

class PtraceSession {
 public:
  PtraceSession(pid_t pid, WaitManager& waits) : pid_(pid), waits_(waits) {}
  PtraceSession(const PtraceSession&) = delete;
  PtraceSession& operator=(const PtraceSession&) = delete;
  ~PtraceSession() { detachAll(); }

  // Seizes and stops every thread, re-scanning /proc/<pid>/task until no new thread
  // appears. Error when not a single thread could be seized (permission, already
  // traced, gone); threads that exit or do not stop by `deadline` are recorded in threads().
  Expected<size_t> stopAll(Deadline deadline);
  // Lets every thread go; idempotent.
  void detachAll();

  pid_t pid() const { return pid_; }
  const std::vector<TracedThread>& threads() const { return threads_; }
  size_t stoppedCount() const;

 private:
  bool seize(pid_t tid, std::string& error);
  void waitForStop(TracedThread& t, Deadline deadline);

  pid_t pid_;
  WaitManager& waits_;
  std::vector<TracedThread> threads_;
  bool attached_ = false;
};

}  // namespace hangwatch::forensics
