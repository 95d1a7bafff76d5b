#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
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
