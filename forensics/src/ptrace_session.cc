#include "hangwatch/forensics/ptrace_session.h"

#include <sys/ptrace.h>
#include <sys/user.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "hangwatch/forensics/proc_snapshot.h"

namespace hangwatch::forensics {

bool PtraceSession::seize(pid_t tid, std::string& error) {
  if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    error = std::string("PTRACE_SEIZE: ") + std::strerror(errno);
    return false;
  }
  attached_ = true;
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    error = std::string("PTRACE_INTERRUPT: ") + std::strerror(errno);
  }
  return true;
}

void PtraceSession::waitForStop(TracedThread& t, Deadline deadline) {
  WaitStatus s = waits_.waitFor(t.tid, deadline);
  if (s.stopped()) {
    t.stopped = true;
    t.reinject_signal = s.signalToReinject();
    user_regs_struct regs{};
    if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) == 0) t.fs_base = regs.fs_base;
    return;
  }
  if (s.gone()) {
    t.exited = true;
    t.error = "thread " + s.describe() + " during the attach";
    return;
  }
  t.error = "thread did not stop before the deadline";
}

Expected<size_t> PtraceSession::stopAll(Deadline deadline) {
  std::set<pid_t> known;
  std::string first_error;
  bool any_seized = false;
  // A thread can only be created by a running thread; once every known thread is
  // stopped, one more scan that finds nothing new means we have them all.
  while (true) {
    bool seized_new = false;
    for (int64_t id : listThreadIds(pid_)) {
      pid_t tid = static_cast<pid_t>(id);
      if (!known.insert(tid).second) continue;
      std::string error;
      if (!seize(tid, error)) {
        // ESRCH: the thread exited between the scan and the seize.
        if (errno != ESRCH && first_error.empty()) first_error = error;
        continue;
      }
      any_seized = true;
      TracedThread traced;
      traced.tid = tid;
      threads_.push_back(traced);
      threads_.back().error = error;
      seized_new = true;
    }
    if (!seized_new) break;
    for (TracedThread& t : threads_) {
      if (!t.stopped && !t.exited && t.error.empty()) waitForStop(t, deadline);
    }
    if (Clock::now() >= deadline) break;
  }
  if (!any_seized) {
    if (first_error.empty()) return Error{fmt::format("process {} has no threads left (it exited)", pid_)};
    return Error{first_error};
  }
  if (stoppedCount() == 0) return Error{fmt::format("no thread of process {} stopped", pid_)};
  return stoppedCount();
}

size_t PtraceSession::stoppedCount() const {
  return static_cast<size_t>(std::count_if(threads_.begin(), threads_.end(), [](const TracedThread& t) { return t.stopped; }));
}

void PtraceSession::detachAll() {
  if (!attached_) return;
  for (TracedThread& t : threads_) {
    if (t.exited) continue;
    void* sig = reinterpret_cast<void*>(static_cast<intptr_t>(t.reinject_signal));
    if (t.stopped && ::ptrace(PTRACE_DETACH, t.tid, nullptr, sig) == 0) {
      t.stopped = false;
      continue;
    }
    // Not in a stop: it died (SIGKILL wakes a stopped tracee) or has not yet answered
    // the interrupt. Take what it reports, so a dead thread is reaped and a late stop is detached.
    WaitStatus s = waits_.waitFor(t.tid, deadlineIn(0.1));
    if (s.stopped()) ::ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(s.signalToReinject())));
    t.stopped = false;
    t.exited = s.gone();
  }
  // Threads still seized but not stopped (they never answered the interrupt) cannot be
  // detached by PTRACE_DETACH; the kernel lets them go, interrupt cancelled, when this
  // process exits, which the collector does right after writing its dump.
  attached_ = false;
}

}  // namespace hangwatch::forensics
