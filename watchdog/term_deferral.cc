#include "hangwatch/watchdog/term_deferral.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>

#include "hangwatch/watchdog/monotonic_clock.h"  // monotonicNs: clock_gettime, async-signal-safe

namespace hangwatch::watchdog {
namespace {

std::mutex arm_mutex;
bool armed = false;
struct sigaction job_action;
std::atomic<int64_t> first_term_ns{0};
std::atomic<pid_t> armed_pid{0};
std::atomic<int> wake_fd{-1};  // eventfd: the handler tells the guard a SIGTERM is held
double bound_s = TermDeferral::kHoldBoundS;

// Whatever holds a SIGTERM (a poller or responder blocked on a stalled dump folder, say), it
// goes on `bound_s` after it arrived: hangwatch never keeps a job from ending for longer.
void guard(int fd) {
  pthread_setname_np(pthread_self(), "hangwatch-term");
  for (;;) {
    uint64_t n = 0;
    if (::read(fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) {
      if (errno == EINTR) continue;
      return;
    }
    while (TermDeferral::pending() && TermDeferral::pendingForSeconds() < bound_s)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (TermDeferral::pending()) TermDeferral::release();
  }
}

// Async-signal-safe. Not the process that armed it (a forked child, whose poller is the
// parent's): the job's own action, now.
void holdTerm(int sig) {
  if (::getpid() == armed_pid.load()) {
    int64_t expected = 0;
    if (first_term_ns.compare_exchange_strong(expected, monotonicNs())) {
      const uint64_t one = 1;
      if (const int fd = wake_fd.load(); fd >= 0) (void)!::write(fd, &one, sizeof one);
    }
    return;
  }
  if (!(job_action.sa_flags & SA_SIGINFO) && job_action.sa_handler == SIG_IGN) return;
  sigaction(SIGTERM, &job_action, nullptr);
  raise(sig);  // blocked while this handler runs: delivered to the job's action as it returns
}

}  // namespace

void TermDeferral::arm(double hold_bound_s) {
  std::lock_guard<std::mutex> lock(arm_mutex);
  if (armed) return;
  if (wake_fd.load() < 0) {
    bound_s = hold_bound_s;
    const int fd = ::eventfd(0, EFD_CLOEXEC);
    if (fd >= 0) {
      try {
        std::thread(guard, fd).detach();
        wake_fd.store(fd);
      } catch (const std::exception&) {
        ::close(fd);  // no guard: the poller and the responder still release it
      }
    }
  }
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

bool TermDeferral::releaseEndsProcess() {
  std::lock_guard<std::mutex> lock(arm_mutex);
  if (!armed || !pending()) return false;
  struct sigaction now {};
  const bool held_by_us =
      sigaction(SIGTERM, nullptr, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == &holdTerm;
  return held_by_us && !(job_action.sa_flags & SA_SIGINFO) && job_action.sa_handler == SIG_DFL;
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
