#include "hangwatch/verdict/dump_file_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch::verdict {

bool DumpFileText::open(const std::string& path) {
  constexpr size_t kPad = dumpio::kFastReaderPadding;
  size_ = 0;
  const ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  struct stat st {};
  const size_t expected = ::fstat(fd.get(), &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  if (buffer_.size() < expected + kPad) buffer_.resize(expected + kPad);
  size_t got = 0;
  while (true) {
    if (got + kPad >= buffer_.size()) buffer_.resize(buffer_.size() + 4096);  // the file grew, or fstat said 0
    ssize_t n = ::read(fd.get(), buffer_.data() + got, buffer_.size() - kPad - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  std::fill(buffer_.begin() + static_cast<std::ptrdiff_t>(got), buffer_.begin() + static_cast<std::ptrdiff_t>(got + kPad), '\0');
  size_ = got;
  return true;
}

}  // namespace hangwatch::verdict
