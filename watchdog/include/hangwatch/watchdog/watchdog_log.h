#pragma once
// "hangwatch[rank R]: ..." on stderr. Failures inside the watchdog are logged once
// per distinct key, so a broken dump directory does not flood the job's log.
#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace hangwatch::watchdog {

class WatchdogLog {
 public:
  static WatchdogLog& instance();

  void setRank(int rank) { rank_.store(rank, std::memory_order_relaxed); }
  void info(const std::string& message);
  // Logs only the first time `key` is seen; counts every call.
  void failureOnce(const std::string& key, const std::string& message);
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  void write(const std::string& message);

  std::atomic<int> rank_{-1};
  std::atomic<uint64_t> failures_{0};
  std::mutex mutex_;
  std::set<std::string> seen_;
};

}  // namespace hangwatch::watchdog
