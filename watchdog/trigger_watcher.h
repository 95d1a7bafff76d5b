#pragma once
// TRIGGER.json (DESIGN.md §4): the first detector creates it with O_EXCL semantics;
// every rank looks for it with a throttled stat(), so ranks with nothing in flight
// learn of the hang within one check interval.
#include <cstdint>
#include <optional>
#include <string>

#include "hangwatch/expected.h"
#include "hangwatch/trigger_record.h"

namespace hangwatch::watchdog {

class TriggerWatcher {
 public:
  TriggerWatcher(std::string job_dir, int64_t check_interval_ns);

  // True once TRIGGER.json exists; stats at most once per interval.
  bool triggered(int64_t now_ns);
  // True when this call created the file, false when another detector had already won.
  Expected<bool> fire(const TriggerRecord& record);
  // The record in place (tolerant: nullopt when missing or unreadable).
  std::optional<TriggerRecord> read() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t interval_ns_;
  int64_t next_check_ns_ = 0;
  bool seen_ = false;
};

}  // namespace hangwatch::watchdog
