#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <fmt/format.h>

#include "hangwatch/common/child_process.h"

using hangwatch::ChildCommand;
using hangwatch::ChildProcess;

namespace {

ChildProcess::Clock::time_point in(double seconds) {
  return ChildProcess::Clock::now() +
         std::chrono::duration_cast<ChildProcess::Clock::duration>(std::chrono::duration<double>(seconds));
}

// Gone, or a zombie waiting for whoever inherited it.
bool dead(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return stat.empty() || (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

}  // namespace

TEST_CASE("ChildOutputAndErrorsArriveTogetherWithItsExitCode") {
  ::setenv("HANGWATCH_CHILD_TEST_GONE", "x", 1);
  ChildCommand c{"/bin/sh", {"-c", "echo out; echo err >&2; echo \"[$HANGWATCH_CHILD_TEST_GONE][$SET_HERE]\"; "
                                   "read line || echo stdin-empty; exit 3"},
                 {"HANGWATCH_CHILD_TEST_GONE"}, {{"SET_HERE", "y"}}, ""};
  auto child = ChildProcess::start(c);
  REQUIRE(child);
  std::string out;
  CHECK(child->readOutput(in(10), out, 1 << 16));
  CHECK(out == "out\nerr\n[][y]\nstdin-empty\n");
  CHECK(child->waitUntil(in(10)) == 3);
}

TEST_CASE("AChildInheritsNoFdOfOursButItsStdio") {
  const int leaky = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as a user's job may leave one
  REQUIRE(leaky > 2);
  auto child = ChildProcess::start({"/bin/sh", {"-c", fmt::format("[ -e /proc/self/fd/{} ] && echo inherited; "
                                                                   "[ -e /proc/self/fd/1 ] && echo stdout",
                                                                   leaky)},
                                    {}, {}, ""});
  ::close(leaky);
  REQUIRE(child);
  std::string out;
  CHECK(child->readOutput(in(10), out, 1 << 16));
  CHECK(out == "stdout\n");
  child->waitUntil(in(10));
}

TEST_CASE("ChildOutputKeepsOnlyItsLastBytes") {
  auto child = ChildProcess::start({"/bin/sh", {"-c", "seq 1 20000"}, {}, {}, ""});
  REQUIRE(child);
  std::string out;
  CHECK(child->readOutput(in(10), out, 100));
  CHECK(out.size() == 100);
  CHECK(out.ends_with("19999\n20000\n"));
  CHECK(child->waitUntil(in(10)) == 0);
}

TEST_CASE("ChildOutputCanGoToAFile") {
  const std::string path = std::filesystem::temp_directory_path() / ("child-test-" + std::to_string(getpid()));
  auto child = ChildProcess::start({"/bin/sh", {"-c", "echo to-file; echo also >&2"}, {}, {}, path});
  REQUIRE(child);
  CHECK(child->waitUntil(in(10)) == 0);
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text == "to-file\nalso\n");
  std::filesystem::remove(path);
}

TEST_CASE("AnOutputFileIsEmptiedFirstAndGetsTheModeAskedFor") {
  const std::string path = std::filesystem::temp_directory_path() / ("child-mode-" + std::to_string(getpid()));
  {
    std::ofstream old(path);
    old << "an earlier collector's log, longer than the new one\n";
  }
  ::chmod(path.c_str(), 0666);
  ChildCommand command{"/bin/sh", {"-c", "echo new"}, {}, {}, path, 0640};
  auto child = ChildProcess::start(command);
  REQUIRE(child);
  CHECK(child->waitUntil(in(10)) == 0);
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(text == "new\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  std::filesystem::remove(path);
}

TEST_CASE("AChildThatCannotStartIsAnErrorNotAnExitCode") {
  auto child = ChildProcess::start({"/nonexistent/debugger", {}, {}, {}, ""});
  REQUIRE_FALSE(child);
  CHECK(child.error().find("cannot start /nonexistent/debugger") == 0);
}

TEST_CASE("AChildRunsInASessionOfItsOwnThatKillSessionEndsWithEverythingItStarted") {
  auto child = ChildProcess::start({"/bin/sh", {"-c", "sleep 60 & echo $!; wait"}, {}, {}, ""});
  REQUIRE(child);
  CHECK(getsid(child->pid()) == child->pid());
  std::string out;
  CHECK_FALSE(child->readOutput(in(1), out, 1 << 16));  // still running at the deadline
  const pid_t grandchild = std::stoi(out);
  CHECK(getsid(grandchild) == child->pid());
  CHECK_FALSE(child->waitUntil(in(0.2)).has_value());
  child->killSession();
  CHECK(child->waitUntil(in(10)).has_value());
  for (int i = 0; i < 200 && !dead(grandchild); ++i) usleep(10'000);
  CHECK(dead(grandchild));
}

TEST_CASE("WaitingStopsWhenTheCallerGivesUp") {
  auto child = ChildProcess::start({"/bin/sh", {"-c", "sleep 60"}, {}, {}, ""});
  REQUIRE(child);
  int asked = 0;
  CHECK_FALSE(child->waitUntil(in(30), [&] { return ++asked >= 3; }).has_value());
  CHECK(asked == 3);
  child->killSession();
  CHECK(child->waitUntil(in(10)).has_value());
}

namespace {

// Runs `body` in a forked child of this test and returns its exit code, so a test can
// change process-wide state (stdio, every fd's flags) without touching the test runner.
int inForkedChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool closeOnExec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

}  // namespace

TEST_CASE("EveryWayOfMarkingFdsCloseOnExecMarksThemAllButStdio") {
  using Way = hangwatch::CloseOnExecWay;
  for (Way way : {Way::kCloseRange, Way::kProcFdList, Way::kEveryPossibleFd}) {
    INFO("way " << static_cast<int>(way));
    CHECK(inForkedChild([way] {
            const int leaky = ::open("/dev/null", O_RDONLY);
            const int high = ::fcntl(leaky, F_DUPFD, 200);
            if (leaky < 3 || high < 200 || closeOnExec(leaky) || closeOnExec(high) || closeOnExec(1)) return 10;
            const Way used = hangwatch::markFdsAboveStdioCloseOnExec(way);
            // close_range needs Linux 5.11; an older kernel falls through to the next way.
            if (way != Way::kCloseRange && used != way) return 11;
            return closeOnExec(leaky) && closeOnExec(high) && !closeOnExec(0) && !closeOnExec(1) && !closeOnExec(2)
                       ? 0
                       : 12;
          }) == 0);
  }
}

TEST_CASE("AChildGetsTheCallersSignalMaskNotTheOneBlockingEverythingWhileItStarts") {
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, &old);
  // grep itself, no shell: dash starts by clearing its mask.
  auto child = ChildProcess::start({"/bin/grep", {"SigBlk", "/proc/self/status"}, {}, {}, ""});
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  REQUIRE(child);
  std::string out;
  CHECK(child->readOutput(in(10), out, 1 << 16));
  CHECK(out == fmt::format("SigBlk:\t{:016x}\n", 1ULL << (SIGUSR2 - 1)));
  CHECK(child->waitUntil(in(10)) == 0);
}

TEST_CASE("AChildOfAProcessWithoutStdioStillGetsStdinOutputAndErrors") {
  CHECK(inForkedChild([] {
          ::close(0);
          ::close(1);
          ::close(2);
          auto child =
              ChildProcess::start({"/bin/sh", {"-c", "read line || echo stdin-empty; echo err >&2"}, {}, {}, ""});
          if (!child) return 10;
          std::string out;
          child->readOutput(in(10), out, 1 << 16);
          return out == "stdin-empty\nerr\n" && child->waitUntil(in(10)) == 0 ? 0 : 11;
        }) == 0);
}

TEST_CASE("AChildKilledBySignalReportsTheSignal") {
  auto child = ChildProcess::start({"/bin/sh", {"-c", "kill -TERM $$"}, {}, {}, ""});
  REQUIRE(child);
  CHECK(child->waitUntil(in(10)) == SIGTERM);
}

TEST_CASE("OnlyRegularExecutableFilesAreFoundOnPath") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("path-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "a" / "tool");  // a folder named like the tool
  std::filesystem::create_directories(dir / "b");
  std::filesystem::create_directories(dir / "c");
  std::ofstream(dir / "b" / "tool") << "not executable\n";
  std::ofstream(dir / "c" / "tool") << "#!/bin/sh\n";
  std::filesystem::permissions(dir / "c" / "tool", std::filesystem::perms::owner_all);
  const std::string saved = std::getenv("PATH");
  ::setenv("PATH", fmt::format("{0}/a:{0}/b:{0}/c", dir.string()).c_str(), 1);
  auto found = hangwatch::findExecutableOnPath("tool");
  auto absent = hangwatch::findExecutableOnPath("no-such-tool");
  ::setenv("PATH", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
  CHECK(found == (dir / "c" / "tool").string());
  CHECK_FALSE(absent.has_value());
}

TEST_CASE("AChildThatHoldsSigtermPassesTheHoldToWhatItStartsAndSigkillStillEndsIt") {
  // The shell starts a grandchild, as the collector starts its debugger; a SIGTERM to both
  // (a launcher signalling every process of the job) ends neither.
  // Python, not a shell: dash unblocks every signal at start, gdb and Python keep the mask.
  const std::optional<std::string> python = hangwatch::findExecutableOnPath("python3");
  REQUIRE(python);
  const std::string pid_file = fmt::format("/tmp/hangwatch-hold-term-{}", ::getpid());
  ChildCommand c{*python,
                 {"-c", "import os, subprocess, sys\n"
                        "p = subprocess.Popen(['sleep', '30'])\n"
                        "open(sys.argv[1] + '.tmp', 'w').write(str(p.pid))\n"
                        "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
                        "p.wait()\n",
                  pid_file},
                 {}, {}, "/dev/null"};
  c.hold_term = true;
  auto child = ChildProcess::start(c);
  REQUIRE(child);
  std::string text;
  for (int i = 0; i < 500 && text.empty(); ++i) {
    std::ifstream in(pid_file);
    std::getline(in, text);
    if (text.empty()) ::usleep(10'000);
  }
  std::filesystem::remove(pid_file);
  REQUIRE_FALSE(text.empty());
  const pid_t grandchild = std::stoi(text);
  ::kill(child->pid(), SIGTERM);
  ::kill(grandchild, SIGTERM);
  CHECK_FALSE(child->waitUntil(in(0.5)));
  CHECK_FALSE(dead(grandchild));
  child->killSession();
  CHECK(child->waitUntil(in(10)));
  for (int i = 0; i < 100 && !dead(grandchild); ++i) ::usleep(10'000);
  CHECK(dead(grandchild));
}
