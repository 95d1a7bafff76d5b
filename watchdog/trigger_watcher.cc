#include "trigger_watcher.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "hangwatch/atomic_file.h"
#include "hangwatch/job_layout.h"

namespace hangwatch::watchdog {

TriggerWatcher::TriggerWatcher(std::string job_dir, int64_t check_interval_ns)
    : path_(triggerPath(job_dir)), interval_ns_(check_interval_ns) {}

bool TriggerWatcher::triggered(int64_t now_ns) {
  if (seen_) return true;
  if (now_ns < next_check_ns_) return false;
  next_check_ns_ = now_ns + interval_ns_;
  struct stat st;
  seen_ = ::stat(path_.c_str(), &st) == 0;
  return seen_;
}

Expected<bool> TriggerWatcher::fire(const TriggerRecord& record) {
  auto created = createFileExclusively(path_, toJson(record).dump(2) + "\n");
  if (created.ok()) seen_ = true;
  return created;
}

std::optional<TriggerRecord> TriggerWatcher::read() const {
  std::ifstream in(path_);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  auto t = triggerFromJson(j);
  if (!t) return std::nullopt;
  return *t;
}

}  // namespace hangwatch::watchdog
