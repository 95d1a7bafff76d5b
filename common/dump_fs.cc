#include "hangwatch/common/dump_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/common/dump_mode.h"
#include "hangwatch/common/scoped_fd.h"

namespace hangwatch {
namespace dump_fs_local {

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// A signal may interrupt an open() that waits (a FIFO, an NFS mount mounted intr): the helper's
// SIGHUP, under ThreadSanitizer even with SA_RESTART. The operation goes on.
int openRetrying(const char* path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class LocalDumpFs final : public DumpFs {
 public:
  Expected<Written> writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                    const std::function<void()>& progress) override {
    std::string tmp;
    Expected<int> created = createTemporary(path, tmp, mode);
    if (!created) return Error{created.error()};
    if (progress) progress();
    ScopedFd fd(*created);
    bool ok = writeAll(fd.get(), contents);
    if (ok && progress) progress();
    ok = ok && ::fsync(fd.get()) == 0;
    const int saved = errno;
    fd.close();
    if (!ok) {
      errno = saved;
      std::string msg = errnoText("cannot write", tmp);
      ::unlink(tmp.c_str());
      return Error{msg};
    }
    if (progress) progress();
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      std::string msg = errnoText("cannot rename into", path);
      ::unlink(tmp.c_str());
      return Error{msg};
    }
    return Written{path};
  }

  Expected<bool> createExclusively(const std::string& path, std::string_view contents, mode_t mode) override {
    // Written under a private name first, then link()ed into place: link fails with EEXIST
    // when someone else won, and the winner's file is never partial.
    std::string tmp;
    Expected<int> created = createTemporary(path, tmp, mode);
    if (!created) return Error{created.error()};
    ScopedFd fd(*created);
    const bool ok = writeAll(fd.get(), contents) && ::fsync(fd.get()) == 0;
    fd.close();
    if (!ok) {
      std::string msg = errnoText("cannot write", tmp);
      ::unlink(tmp.c_str());
      return Error{msg};
    }
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int saved = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) return true;
    if (saved == EEXIST) return false;
    errno = saved;
    return Error{errnoText("cannot create", path)};
  }

  Expected<std::string> read(const std::string& path, size_t limit, bool create, mode_t mode) override {
    ScopedFd fd(openRetrying(path.c_str(), O_RDONLY | O_CLOEXEC | (create ? O_CREAT : 0), mode));
    if (!fd.valid() && errno == ENOENT && create) {
      (void)makeDirs(std::filesystem::path(path).parent_path().string(), dumpDirMode());
      fd = ScopedFd(openRetrying(path.c_str(), O_RDONLY | O_CLOEXEC | O_CREAT, mode));
    }
    if (!fd.valid()) return Error{errno == ENOENT ? "no such file " + path : errnoText("cannot open", path)};
    std::string text;
    char buf[65536];
    while (text.size() < limit) {
      const ssize_t n = ::read(fd.get(), buf, std::min(sizeof buf, limit - text.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error{errnoText("cannot read", path)};
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    return text;
  }

  std::optional<FileStat> stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return std::nullopt;
    return FileStat{static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9,
                    static_cast<uint64_t>(st.st_size), S_ISDIR(st.st_mode)};
  }

  Expected<bool> makeDirs(const std::string& dir, mode_t mode) override {
    namespace fs = std::filesystem;
    std::vector<fs::path> missing;
    std::error_code ec;
    for (fs::path at = fs::path(dir).lexically_normal(); !at.empty() && !fs::exists(at, ec); at = at.parent_path()) {
      missing.push_back(at);
      if (at == at.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      const int rc = ::mkdir(it->c_str(), mode);
      if (rc != 0 && errno != EEXIST)
        return Error{"cannot create directory " + it->string() + ": " + std::strerror(errno)};
      if (rc == 0) ::chmod(it->c_str(), mode);  // the umask may have taken bits away
    }
    return !missing.empty();
  }

  Expected<bool> append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                        bool sync) override {
    std::unique_lock lock(open_mutex_, std::defer_lock);
    ScopedFd here;
    ScopedFd* fd = &here;
    if (keep_open) {
      lock.lock();
      fd = &open_[path];
    }
    std::string error;
    if (!fd->valid()) *fd = openForAppend(path, mode, &error);
    if (!fd->valid()) {
      if (keep_open) open_.erase(path);
      return Error{error};
    }
    const bool ok = writeAll(fd->get(), text) && (!sync || ::fsync(fd->get()) == 0);
    if (ok) return true;
    error = errnoText(sync ? "cannot write or flush" : "cannot append to", path);
    if (keep_open) open_.erase(path);
    return Error{error};
  }

 private:
  // Creates the temporary file, making the parent directories only when they are missing: on
  // shared storage every stat() of an existing directory is one more metadata round trip.
  Expected<int> createTemporary(const std::string& path, std::string& tmp, mode_t mode) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), std::random_device{}());
    int fd = openRetrying(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0 && errno == ENOENT) {
      if (const std::string parent = std::filesystem::path(path).parent_path().string(); !parent.empty())
        if (auto p = makeDirs(parent, dumpDirMode()); !p) return Error{p.error()};
      fd = openRetrying(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    }
    if (fd < 0) return Error{errnoText("cannot create", tmp)};
    ::fchmod(fd, mode);  // whatever the umask took away
    return fd;
  }

  // Opens `path` for appending, making its folder when missing.
  ScopedFd openForAppend(const std::string& path, mode_t mode, std::string* error) {
    ScopedFd fd(openRetrying(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode));
    if (!fd.valid() && errno == ENOENT) {
      if (Expected<bool> made = makeDirs(std::filesystem::path(path).parent_path().string(), dumpDirMode()); !made) {
        *error = made.error();
        return fd;
      }
      fd = ScopedFd(openRetrying(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode));
    }
    if (!fd.valid())
      *error = errnoText("cannot open", path);
    else
      ::fchmod(fd.get(), mode);
    return fd;
  }

  std::mutex open_mutex_;
  std::map<std::string, ScopedFd> open_;  // kept open for the next append (keep_open)
};

thread_local DumpFs* this_threads_fs = nullptr;

}  // namespace dump_fs_local

using dump_fs_local::LocalDumpFs;
using dump_fs_local::this_threads_fs;

DumpFs& localDumpFs() {
  static LocalDumpFs* const local = new LocalDumpFs;  // never destroyed: used until the process ends
  return *local;
}

DumpFs& dumpFs() { return this_threads_fs != nullptr ? *this_threads_fs : localDumpFs(); }

ThreadDumpFs::ThreadDumpFs(DumpFs* fs) : previous_(this_threads_fs) { this_threads_fs = fs; }

ThreadDumpFs::~ThreadDumpFs() { this_threads_fs = previous_; }

}  // namespace hangwatch
