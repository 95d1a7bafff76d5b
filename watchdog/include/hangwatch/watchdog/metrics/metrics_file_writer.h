#pragma once
// Appends whole lines to metrics/rNNNNN.jsonl. Each line goes out in one write() on an
// O_APPEND descriptor, so a reader (or a rank sharing the file by mistake) never sees
// half a line. The first failure is logged and every later line is dropped: metrics
// must never take the training job down.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hangwatch/common/scoped_fd.h"

namespace hangwatch::watchdog {

class MetricsFileWriter {
 public:
  using FailureLog = std::function<void(const std::string&)>;

  MetricsFileWriter(std::string path, FailureLog log);

  // `line` ends with '\n'. False when the line was not written.
  bool append(std::string_view line);
  bool failed() const { return failed_; }
  uint64_t linesDropped() const { return lines_dropped_; }

 private:
  bool open();
  void fail(const std::string& message);

  std::string path_;
  FailureLog log_;
  ScopedFd fd_;  // opened at the first line
  bool failed_ = false;
  uint64_t lines_dropped_ = 0;
};

}  // namespace hangwatch::watchdog
