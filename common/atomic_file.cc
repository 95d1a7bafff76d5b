#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/common/dump_mode.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

namespace hangwatch {
namespace {

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

Expected<bool> ensureParent(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return true;
  return makeDumpDirs(parent.string());
}

// Creates the temporary file, making the parent directories only when they are missing: on
// shared storage every stat() of an existing directory is one more metadata round trip.
Expected<int> createTemporary(const std::string& path, std::string& tmp, mode_t mode) {
  tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), std::random_device{}());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0 && errno == ENOENT) {
    if (auto p = ensureParent(path); !p) return Error{p.error()};
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  }
  if (fd < 0) return Error{errnoText("cannot create", tmp)};
  ::fchmod(fd, mode);  // whatever the umask took away
  return fd;
}

}  // namespace

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents) {
  return writeFileAtomically(path, contents, dumpFileMode());
}

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode) {
  return writeFileAtomically(path, contents, mode, [] {});
}

Expected<Written> writeFileAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                      const std::function<void()>& progress) {
  std::string tmp;
  Expected<int> created = createTemporary(path, tmp, mode);
  if (!created) return Error{created.error()};
  progress();
  ScopedFd fd(*created);
  bool ok = writeAll(fd.get(), contents);
  if (ok) progress();
  ok = ok && ::fsync(fd.get()) == 0;
  int saved = errno;
  fd.close();
  if (!ok) {
    errno = saved;
    std::string msg = errnoText("cannot write", tmp);
    ::unlink(tmp.c_str());
    return Error{msg};
  }
  progress();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = errnoText("cannot rename into", path);
    ::unlink(tmp.c_str());
    return Error{msg};
  }
  return Written{path};
}

Expected<bool> createFileExclusively(const std::string& path, std::string_view contents) {
  // Write the content under a private name first, then link() it into place:
  // link fails with EEXIST if someone else won, and the winner's file is never partial.
  std::string tmp;
  Expected<int> created = createTemporary(path, tmp, dumpFileMode());
  if (!created) return Error{created.error()};
  ScopedFd fd(*created);
  bool ok = writeAll(fd.get(), contents) && ::fsync(fd.get()) == 0;
  fd.close();
  if (!ok) {
    std::string msg = errnoText("cannot write", tmp);
    ::unlink(tmp.c_str());
    return Error{msg};
  }
  int rc = ::link(tmp.c_str(), path.c_str());
  int saved = errno;
  ::unlink(tmp.c_str());
  if (rc == 0) return true;
  if (saved == EEXIST) return false;
  errno = saved;
  return Error{errnoText("cannot create", path)};
}

}  // namespace hangwatch
