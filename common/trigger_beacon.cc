#include "hangwatch/common/trigger_beacon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch {
namespace {

constexpr size_t kMaxBeaconBytes = 64 * 1024;

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

TriggerBeacon::TriggerBeacon(std::string job_dir)
    : job_dir_(std::move(job_dir)), path_(triggerBeaconPath(job_dir_)), trigger_path_(triggerPath(job_dir_)) {}

Expected<BeaconState> TriggerBeacon::read(int64_t base) {
  int flags = O_RDONLY | O_CLOEXEC | (exists_ ? 0 : O_CREAT);
  ScopedFd fd(::open(path_.c_str(), flags, dumpFileMode()));
  if (!fd.valid() && errno == ENOENT) {
    (void)makeDumpDirs(job_dir_);
    fd = ScopedFd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_CREAT, dumpFileMode()));
  }
  if (!fd.valid()) {
    exists_ = false;
    return Error{errnoText("cannot open " + path_)};
  }
  exists_ = true;
  std::string text;
  char buf[4096];
  while (text.size() < kMaxBeaconBytes) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return parseBeacon(text, base);
}

Expected<bool> TriggerBeacon::append(const std::string& line) {
  (void)makeDumpDirs(job_dir_);
  const ScopedFd fd(::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, dumpFileMode()));
  if (!fd.valid()) return Error{errnoText("cannot open " + path_)};
  std::string data = line + "\n";
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{errnoText("cannot write " + path_)};
    p += n;
    left -= static_cast<size_t>(n);
  }
  // Readers on other nodes see the line once it reached the server: flushed before close.
  bool synced = ::fsync(fd.get()) == 0;
  if (!synced) return Error{errnoText("cannot flush " + path_)};
  return true;
}

bool TriggerBeacon::triggerFileExists() const {
  struct stat st;
  return ::stat(trigger_path_.c_str(), &st) == 0;
}

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
