#include "hangwatch/watchdog/watchdog_log.h"

#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace hangwatch::watchdog {

WatchdogLog& WatchdogLog::instance() {
  // Leaked on purpose: interposers may log from static destructors of the job.
  static WatchdogLog* log = new WatchdogLog();
  return *log;
}

void WatchdogLog::info(const std::string& message) { write(message); }

void WatchdogLog::failureOnce(const std::string& key, const std::string& message) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!seen_.insert(key).second) return;
  }
  write(message);
}

void WatchdogLog::write(const std::string& message) {
  int saved = errno;
  int rank = rank_.load(std::memory_order_relaxed);
  // Without a launcher rank (a single process driving several devices), the process.
  std::string line = rank >= 0 ? fmt::format("hangwatch[rank {}]: {}\n", rank, message)
                               : fmt::format("hangwatch[pid {}]: {}\n", ::getpid(), message);
  // One write() per line keeps lines of concurrent ranks from interleaving.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  errno = saved;
}

}  // namespace hangwatch::watchdog
