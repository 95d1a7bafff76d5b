#include "hangwatch/watchdog/term_deferral.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "hangwatch/watchdog/monotonic_clock.h"  // monotonicNs: clock_gettime, async-signal-safe

namespace hangwatch::watchdog {
namespace {

std::mutex arm_mutex;
bool armed = false;
struct sigaction job_action;
std::atomic<int64_t> first_term_ns{0};
std::atomic<pid_t> armed_pid{0};

// Async-signal-safe. Not the process that armed it (a forked child, whose poller is the
// parent's): the job's own action, now.
void holdTerm(int sig) {
  if (::getpid() == armed_pid.load()) {
    int64_t expected = 0;
    first_term_ns.compare_exchange_strong(expected, monotonicNs());
    return;
  }
  if (!(job_action.sa_flags & SA_SIGINFO) && job_action.sa_handler == SIG_IGN) return;
  sigaction(SIGTERM, &job_action, nullptr);
  raise(sig);  // blocked while this handler runs: delivered to the job's action as it returns
}

}  // namespace

void TermDeferral::arm() {
  std::lock_guard<std::mutex> lock(arm_mutex);
  if (armed) return;
  struct sigaction hold {};
  hold.sa_handler = &holdTerm;
  sigemptyset(&hold.sa_mask);
  hold.sa_flags = SA_RESTART;
  armed_pid.store(::getpid());
  if (sigaction(SIGTERM, &hold, &job_action) == 0) armed = true;
}

bool TermDeferral::pending() { return first_term_ns.load() != 0; }

double TermDeferral::pendingForSeconds() {
  int64_t t = first_term_ns.load();
  return t == 0 ? 0 : static_cast<double>(monotonicNs() - t) * 1e-9;
}

void TermDeferral::release() {
  std::lock_guard<std::mutex> lock(arm_mutex);
  if (!armed) return;
  armed = false;
  // The job may have installed a handler of its own meanwhile (Python's signal.signal): keep it.
  struct sigaction now {};
  if (sigaction(SIGTERM, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == &holdTerm)
    sigaction(SIGTERM, &job_action, nullptr);
  if (first_term_ns.exchange(0) != 0) ::kill(::getpid(), SIGTERM);
}

}  // namespace hangwatch::watchdog
