// Who may attach to a rank under Yama's ptrace_scope 1 (collector_launcher.h, allowTracer):
// the collector the watchdog started, never another process of the same user. Needs a kernel
// with Yama and a writable ptrace_scope (root); elsewhere it says so and checks nothing.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "hangwatch/watchdog/collector_launcher.h"

using hangwatch::watchdog::CollectorLauncher;

namespace {

constexpr const char* kScope = "/proc/sys/kernel/yama/ptrace_scope";

std::string readScope() {
  std::ifstream in(kScope);
  std::string s;
  std::getline(in, s);
  return s;
}

bool writeScope(const std::string& value) {
  std::ofstream out(kScope);
  out << value << "\n";
  out.close();
  return out.good() && readScope() == value;
}

// A child that tries to attach to `target` (an ancestor of it) and exits 0 when it could.
pid_t attacher(pid_t target, int go_fd) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  char c;
  if (::read(go_fd, &c, 1) != 1) ::_exit(3);
  if (::ptrace(PTRACE_SEIZE, target, nullptr, nullptr) != 0) ::_exit(1);
  ::ptrace(PTRACE_DETACH, target, nullptr, nullptr);
  ::_exit(0);
}

int exitCodeOf(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("UnderPtraceScope1OnlyTheNamedCollectorMayAttachNotAnotherProcessOfTheSameUser") {
  const std::string before = readScope();
  if (before.empty() || !writeScope("1") || !writeScope(before)) {
    WARN("no Yama here, or ptrace_scope is not writable: nothing to check");
    return;
  }
  REQUIRE(writeScope("1"));
  // The target and both attachers run as one unprivileged user: root's CAP_SYS_PTRACE passes Yama.
  pid_t target = ::fork();
  REQUIRE(target >= 0);
  if (target == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(12);
    // The target: two children, one named as its collector; each tries to attach to it.
    int go_collector[2], go_other[2];
    if (::pipe(go_collector) != 0 || ::pipe(go_other) != 0) ::_exit(10);
    CollectorLauncher::allowTracer(::getpid());
    pid_t collector = attacher(::getpid(), go_collector[0]);
    pid_t other = attacher(::getpid(), go_other[0]);
    CollectorLauncher::allowTracer(collector);
    if (::write(go_collector[1], "g", 1) != 1 || ::write(go_other[1], "g", 1) != 1) ::_exit(11);
    const int collector_code = exitCodeOf(collector);
    const int other_code = exitCodeOf(other);
    ::_exit(collector_code == 0 && other_code == 1 ? 0 : 20 + collector_code * 4 + other_code);
  }
  const int code = exitCodeOf(target);
  writeScope(before);
  // 20 + 4 * collector + other: 20 is "the other attached too", 25 "the collector could not".
  CHECK(code == 0);
}
