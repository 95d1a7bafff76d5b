#include "hangwatch/watchdog/metrics/metrics_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "hangwatch/common/dump_mode.h"

namespace hangwatch::watchdog {

MetricsFileWriter::MetricsFileWriter(std::string path, FailureLog log) : path_(std::move(path)), log_(std::move(log)) {}

bool MetricsFileWriter::open() {
  auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) {
    if (Expected<bool> made = makeDumpDirs(parent.string()); !made) {
      fail(made.error());
      return false;
    }
  }
  fd_ = ScopedFd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, dumpFileMode()));
  if (!fd_.valid()) {
    fail("cannot open " + path_ + ": " + std::strerror(errno));
    return false;
  }
  applyDumpMode(fd_.get());
  return true;
}

bool MetricsFileWriter::append(std::string_view line) {
  if (failed_ || (!fd_.valid() && !open())) {
    ++lines_dropped_;
    return false;
  }
  ssize_t n;
  do {
    n = ::write(fd_.get(), line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(line.size())) return true;
  // A short write leaves a torn line the reader skips; stopping here keeps it the last.
  fail(n < 0 ? "cannot write " + path_ + ": " + std::strerror(errno) : "short write to " + path_);
  ++lines_dropped_;
  return false;
}

void MetricsFileWriter::fail(const std::string& message) {
  failed_ = true;
  fd_.close();
  if (log_) log_("metrics disabled: " + message);
}

}  // namespace hangwatch::watchdog
