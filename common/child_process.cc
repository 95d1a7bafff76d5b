#include "hangwatch/common/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include <fmt/format.h>

extern char** environ;

namespace hangwatch {
namespace {

// Everything the child needs, built before vfork: between vfork and execve the child
// shares our memory, so it only reads this and makes async-signal-safe calls.
struct ExecPlan {
  const char* exe;
  std::vector<char*> argv;
  std::vector<char*> envp;
  int stdin_fd;
  int output_fd;
  int exec_error_fd;  // the child writes execve's errno here; EOF means the exec happened
  sigset_t caller_mask;
  bool hold_term;
  int pass_fd;  // becomes fd 3; never 0-3 itself
  bool die_with_parent;
  int parent_death_signal;
};

std::vector<std::string> environmentFor(const ChildCommand& c) {
  auto replaced = [&](std::string_view entry) {
    std::string_view name = entry.substr(0, entry.find('='));
    for (const std::string& gone : c.unset_env)
      if (name == gone) return true;
    for (const auto& [set, value] : c.set_env)
      if (name == set) return true;
    return false;
  };
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (!replaced(*e)) env.emplace_back(*e);
  for (const auto& [name, value] : c.set_env) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Our own fds never land on 0-2 (a job may have closed its stdio), so the child's dup2s
// onto 0-2 cannot overwrite one before it is used.
ScopedFd aboveStdio(int fd) {
  if (fd < 0 || fd > 2) return ScopedFd(fd);
  ScopedFd low(fd);
  return ScopedFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
}

int parseFd(const char* name) {
  int fd = 0;
  for (; *name != '\0'; ++name) {
    if (*name < '0' || *name > '9') return -1;
    fd = fd * 10 + (*name - '0');
  }
  return fd;
}

bool markFdsListedInProc() {
  struct LinuxDirent64 {
    ino64_t d_ino;
    off64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
  };
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char buf[4096];
  long n = 0;
  while ((n = ::syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long off = 0; off < n;) {
      const auto* entry = reinterpret_cast<const LinuxDirent64*>(buf + off);
      const int fd = parseFd(entry->d_name);
      if (fd > 2 && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      off += entry->d_reclen;
    }
  }
  ::close(dir);
  return n == 0;
}

[[noreturn]] void execChild(const ExecPlan& plan) {
  // A handler of the job's must never run here, in its memory: back to the defaults while
  // every signal is still blocked (ignored ones stay ignored, as across any exec).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa;
    if (::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL) {
      sa.sa_handler = SIG_DFL;
      sa.sa_flags = 0;
      ::sigaction(sig, &sa, nullptr);
    }
  }
  ::setsid();
  int err = 0;
  if (::dup2(plan.stdin_fd, 0) < 0 || ::dup2(plan.output_fd, 1) < 0 || ::dup2(plan.output_fd, 2) < 0) err = errno;
  // The job's sockets and files (a listening port, a lock) must not stay open in a
  // collector that outlives it.
  markFdsAboveStdioCloseOnExec();
  if (err == 0 && plan.pass_fd >= 0 && ::dup2(plan.pass_fd, 3) < 0) err = errno;
  if (err == 0 && plan.die_with_parent && ::prctl(PR_SET_PDEATHSIG, plan.parent_death_signal) != 0) err = errno;
  sigset_t mask = plan.caller_mask;
  if (plan.hold_term) ::sigaddset(&mask, SIGTERM);
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  if (err == 0) {
    ::execve(plan.exe, plan.argv.data(), plan.envp.data());
    err = errno;
  }
  while (::write(plan.exec_error_fd, &err, sizeof err) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// The errno the child sent before exiting, or 0 once the exec happened (EOF).
int execErrorOf(int exec_error_fd) {
  int err = 0;
  ssize_t n;
  while ((n = ::read(exec_error_fd, &err, sizeof err)) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(sizeof err) ? err : 0;
}

}  // namespace

CloseOnExecWay markFdsAboveStdioCloseOnExec(CloseOnExecWay first) {
  // close_range's CLOEXEC flag needs Linux 5.11 (glibc's wrapper 2.34): the raw syscall.
  if (first == CloseOnExecWay::kCloseRange && ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return CloseOnExecWay::kCloseRange;
  if (first != CloseOnExecWay::kEveryPossibleFd && markFdsListedInProc()) return CloseOnExecWay::kProcFdList;
  rlimit limit{};
  const bool limited = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  const rlim_t end = limited ? limit.rlim_cur : 65536;
  for (rlim_t fd = 3; fd < end; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return CloseOnExecWay::kEveryPossibleFd;
}

Expected<ChildProcess> ChildProcess::start(const ChildCommand& c) {
  auto failed = [&](const char* what) {
    return Error{fmt::format("cannot start {}: {}: {}", c.exe, what, std::strerror(errno))};
  };
  std::vector<std::string> args{c.exe};
  args.insert(args.end(), c.args.begin(), c.args.end());
  std::vector<std::string> env = environmentFor(c);

  ScopedFd devnull = aboveStdio(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull.valid()) return failed("/dev/null");
  ScopedFd output_read, output_write;
  if (c.output_path.empty()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return failed("pipe");
    output_read = aboveStdio(fds[0]);
    output_write = aboveStdio(fds[1]);
  } else {
    output_write = aboveStdio(::open(c.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    // An earlier run's file keeps its old mode through O_TRUNC: set it either way.
    if (output_write.valid()) (void)::fchmod(output_write.get(), c.output_mode);
  }
  if (!output_write.valid()) return failed(c.output_path.empty() ? "pipe" : c.output_path.c_str());
  int exec_error[2];
  if (::pipe2(exec_error, O_CLOEXEC) != 0) return failed("pipe");
  ScopedFd exec_error_read(exec_error[0]), exec_error_write(exec_error[1]);
  // The fd passed becomes 3 after stdio is set up: neither it nor the exec-error pipe, used
  // after that, may be 0-3 themselves.
  ScopedFd pass_copy;
  if (c.pass_fd >= 0) {
    if (c.pass_fd <= 3) {
      pass_copy = ScopedFd(::fcntl(c.pass_fd, F_DUPFD_CLOEXEC, 4));
      if (!pass_copy.valid()) return failed("fcntl");
    }
    if (exec_error_write.get() <= 3) {
      exec_error_write = ScopedFd(::fcntl(exec_error_write.get(), F_DUPFD_CLOEXEC, 4));
      if (!exec_error_write.valid()) return failed("fcntl");
    }
  }
  const int pass_fd = pass_copy.valid() ? pass_copy.get() : c.pass_fd;

  ExecPlan plan{c.exe.c_str(),         pointersTo(args), pointersTo(env), devnull.get(), output_write.get(),
                exec_error_write.get(), {},              c.hold_term,     pass_fd,       c.die_with_parent,
                c.parent_death_signal};
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &plan.caller_mask);
  const pid_t pid = ::vfork();
  if (pid == 0) execChild(plan);
  const int vfork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &plan.caller_mask, nullptr);
  exec_error_write.close();
  if (pid < 0) {
    errno = vfork_errno;
    return failed("vfork");
  }
  if (const int err = execErrorOf(exec_error_read.get()); err != 0) {
    ::waitpid(pid, nullptr, 0);
    return Error{fmt::format("cannot start {}: {}", c.exe, std::strerror(err))};
  }
  return ChildProcess(pid, std::move(output_read));
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : output_(std::move(other.output_)), pid_(std::exchange(other.pid_, -1)), exit_code_(other.exit_code_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    output_ = std::move(other.output_);
    pid_ = std::exchange(other.pid_, -1);
    exit_code_ = other.exit_code_;
  }
  return *this;
}

bool ChildProcess::readOutput(Clock::time_point deadline, std::string& out, size_t limit) {
  while (output_.valid()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{output_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(output_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > 2 * limit) out.erase(0, out.size() - limit);
  }
  output_.close();
  if (out.size() > limit) out.erase(0, out.size() - limit);
  return true;
}

std::optional<int> ChildProcess::waitUntil(Clock::time_point deadline, const std::function<bool()>& give_up) {
  auto reaped = [this] {
    int status = 0;
    if (!exit_code_ && pid_ > 0) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) exit_code_ = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
      if (r < 0 && errno == ECHILD) exit_code_ = -1;  // reaped by another waiter: its code is lost
    }
    return exit_code_.has_value();
  };
  while (!reaped() && Clock::now() < deadline && !(give_up && give_up()))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return reaped() ? exit_code_ : std::nullopt;
}

void ChildProcess::killSession() { ::kill(-pid_, SIGKILL); }

std::optional<std::string> findExecutableOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t pos = 0; pos <= dirs.size();) {
    size_t colon = dirs.find(':', pos);
    if (colon == std::string::npos) colon = dirs.size();
    const std::string dir = dirs.substr(pos, colon - pos);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    pos = colon + 1;
  }
  return std::nullopt;
}

}  // namespace hangwatch
