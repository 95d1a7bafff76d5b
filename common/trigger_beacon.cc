#include "hangwatch/common/trigger_beacon.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/job_layout.h"

namespace hangwatch {
namespace {

constexpr size_t kMaxBeaconBytes = 64 * 1024;

}  // namespace

TriggerBeacon::TriggerBeacon(std::string job_dir)
    : job_dir_(std::move(job_dir)), path_(triggerBeaconPath(job_dir_)), trigger_path_(triggerPath(job_dir_)) {}

Expected<BeaconState> TriggerBeacon::read(int64_t base) {
  // Made (with the job's folder) the first time, so that later looks are one open and read.
  Expected<std::string> text = dumpFs().read(path_, kMaxBeaconBytes, /*create=*/!exists_, dumpFileMode());
  exists_ = text.ok();
  if (!text) return Error{text.error()};
  return parseBeacon(*text, base);
}

Expected<bool> TriggerBeacon::append(const std::string& line) {
  // Readers on other nodes see the line once it reached the server: flushed before it returns.
  return dumpFs().append(path_, line + "\n", dumpFileMode(), /*keep_open=*/false, /*sync=*/true);
}

bool TriggerBeacon::triggerFileExists() const { return dumpFs().stat(trigger_path_).has_value(); }

std::string beaconTriggerLine(int rank, const std::string& host, int64_t pid, double time_unix_s) {
  return fmt::format("triggered rank={} host={} pid={} time={:.3f}", rank, host, pid, time_unix_s);
}

std::string beaconSuspectLine(int episode, int rank, const std::string& host, int64_t pid, double time_unix_s) {
  return fmt::format("suspected episode={} rank={} host={} pid={} time={:.3f}", episode, rank, host, pid, time_unix_s);
}

std::string beaconCompleteLine(int ranks_done, int ranks_given_up, double time_unix_s) {
  return fmt::format("complete ranks_done={} ranks_given_up={} time={:.3f}", ranks_done, ranks_given_up, time_unix_s);
}

BeaconState parseBeacon(const std::string& text, int64_t base) {
  BeaconState s;
  s.size = static_cast<int64_t>(text.size());
  size_t pos = base > 0 ? static_cast<size_t>(std::min<int64_t>(base, s.size)) : 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // a line still being written
    std::string_view line(text.data() + pos, end - pos);
    if (line.rfind("triggered", 0) == 0) s.triggered = true;
    if (line.rfind("complete", 0) == 0) s.complete = true;
    if (line.rfind("suspected episode=", 0) == 0) {
      int episode = std::atoi(std::string(line.substr(18, line.find(' ', 18) - 18)).c_str());
      s.suspected_episode = std::max(s.suspected_episode, episode);
    }
    pos = end + 1;
  }
  return s;
}

}  // namespace hangwatch
