#include <pthread.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "hangwatch/forensics/proc_snapshot.h"

using namespace hangwatch::forensics;

TEST_CASE("StatusFieldReadsTrimmedValues") {
  std::string status = "Name:\tring_train\nState:\tS (sleeping)\nTgid:\t42\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n";
  CHECK(statusField(status, "State") == "S (sleeping)");
  CHECK(statusField(status, "TracerPid") == "0");
  CHECK(statusField(status, "Uid") == "0\t0\t0\t0");
  CHECK_FALSE(statusField(status, "Tgi").has_value());
  CHECK_FALSE(statusField(status, "Missing").has_value());
}

TEST_CASE("StatStateSurvivesSpacesAndParenthesesInTheName") {
  CHECK(statStateLetter("42 (ring_train) S 1 42 42 0") == "S");
  CHECK(statStateLetter("43 (a b) c)) t 1 2") == "t");
  CHECK_FALSE(statStateLetter("garbage").has_value());
}

TEST_CASE("MapsLinesParseWithAndWithoutPath") {
  auto m = parseMapsLine("7f12a000-7f12b000 r-xp 00002000 08:01 1234   /usr/lib/my lib.so");
  REQUIRE(m);
  CHECK(m->start == 0x7f12a000);
  CHECK(m->end == 0x7f12b000);
  CHECK(m->perms == "r-xp");
  CHECK(m->offset == 0x2000);
  CHECK(m->path == "/usr/lib/my lib.so");
  auto anon = parseMapsLine("7ffd0000-7ffd1000 rw-p 00000000 00:00 0");
  REQUIRE(anon);
  CHECK(anon->path.empty());
  CHECK_FALSE(parseMapsLine("not a maps line").has_value());
}

TEST_CASE("CmdlineSplitsOnNul") {
  std::string raw("python3\0train.py\0--steps\0005\0", 26);
  CHECK(splitCmdline(raw) == std::vector<std::string>{"python3", "train.py", "--steps", "5"});
}

TEST_CASE("SnapshotOfThisProcessListsItsNamedThreads") {
  pthread_t t;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(pthread_create(&t, nullptr, [](void* arg) -> void* {
    char c;
    (void)!read(*static_cast<int*>(arg), &c, 1);
    return nullptr;
  }, &fds[0]) == 0);
  pthread_setname_np(t, "proc-test-w");
  auto s = readProcSnapshot(getpid());
  REQUIRE(s.ok());
  CHECK_FALSE(s->exe.empty());
  CHECK_FALSE(s->maps.empty());
  CHECK(s->mapsObject("libc"));
  CHECK(s->threads.size() >= 2);
  bool found = false;
  for (const ProcThread& th : s->threads) found = found || th.comm == "proc-test-w";
  CHECK(found);
  CHECK_FALSE(s->isZombie());
  (void)!write(fds[1], "x", 1);
  pthread_join(t, nullptr);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("SnapshotOfAMissingProcessSaysSo") {
  std::ifstream max_file("/proc/sys/kernel/pid_max");
  long pid_max = 0;
  max_file >> pid_max;
  pid_t pid = static_cast<pid_t>(pid_max - 1);
  while (access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0) --pid;
  auto s = readProcSnapshot(pid);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().find("no process with pid") != std::string::npos);
}
