#include "hangwatch/watchdog/io_helper.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/common/child_process.h"

namespace hangwatch::watchdog {

Expected<std::unique_ptr<IoHelper>> IoHelper::start(const std::string& forensics_binary, Tell tell) {
  if (forensics_binary.empty()) return Error{"no forensics binary found (set HANGWATCH_FORENSICS)"};
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Error{fmt::format("socketpair: {}", std::strerror(errno))};
  ScopedFd ours(fds[0]), theirs(fds[1]);
  ChildCommand command{forensics_binary, {"io-helper", "--fd", "3"}, {}, {}, "", 0600};
  // Like the collector: no watchdog of its own.
  command.unset_env.push_back("LD_PRELOAD");
  command.set_env.emplace_back("HANGWATCH_DISABLE", "1");
  // The launcher's SIGTERM to every process of the step must not take the helper before the
  // rank has written what it writes on SIGTERM; it ends with the rank (die_with_parent), and
  // with SIGHUP rather than SIGKILL: a rank killed while the helper writes one of its files
  // (a launcher's SIGKILL, the SIGTERM passed on after the dumps) leaves it whole, not as a
  // temporary file (serveDumpFs).
  command.hold_term = true;
  command.pass_fd = theirs.get();
  command.die_with_parent = true;
  command.parent_death_signal = kHelperParentGoneSignal;
  Expected<ChildProcess> child = ChildProcess::start(command);
  if (!child) return Error{child.error()};
  return std::unique_ptr<IoHelper>(new IoHelper(std::move(ours), child->pid(), std::move(tell)));
}

IoHelper::~IoHelper() {
  // Closing our end is the helper's EOF. A helper blocked in the kernel is left to its
  // SIGHUP (this thread's end) and the bound that follows it, never waited for here.
  remote_ = RemoteDumpFs(ScopedFd());
  for (int i = 0; i < 20; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

template <typename R>
R IoHelper::either(const std::function<R(DumpFs&)>& op) {
  if (!remote_.broken()) {
    R answer = op(remote_);
    if (!remote_.broken()) return answer;
  }
  if (!told_ && tell_) {
    told_ = true;
    tell_(
        fmt::format("the dump-folder I/O helper (pid {}) is gone ({}): the storage thread does its file "
                    "operations itself from now on",
                    pid_, remote_.brokenWhy()));
  }
  return op(localDumpFs());
}

Expected<Written> IoHelper::writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                            const std::function<void()>& progress) {
  return either<Expected<Written>>([&](DumpFs& fs) { return fs.writeAtomically(path, contents, mode, progress); });
}

Expected<bool> IoHelper::createExclusively(const std::string& path, std::string_view contents, mode_t mode) {
  return either<Expected<bool>>([&](DumpFs& fs) { return fs.createExclusively(path, contents, mode); });
}

Expected<std::string> IoHelper::read(const std::string& path, size_t limit, bool create, mode_t mode) {
  return either<Expected<std::string>>([&](DumpFs& fs) { return fs.read(path, limit, create, mode); });
}

std::optional<FileStat> IoHelper::stat(const std::string& path) {
  return either<std::optional<FileStat>>([&](DumpFs& fs) { return fs.stat(path); });
}

Expected<bool> IoHelper::makeDirs(const std::string& dir, mode_t mode) {
  return either<Expected<bool>>([&](DumpFs& fs) { return fs.makeDirs(dir, mode); });
}

Expected<bool> IoHelper::append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                                bool sync) {
  return either<Expected<bool>>([&](DumpFs& fs) { return fs.append(path, text, mode, keep_open, sync); });
}

}  // namespace hangwatch::watchdog
