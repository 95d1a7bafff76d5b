#include "hangwatch/forensics/scoped_fd.h"

#include <unistd.h>

namespace hangwatch::forensics {

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void ScopedFd::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace hangwatch::forensics
