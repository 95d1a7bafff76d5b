#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "hangwatch/forensics/collector.h"
#include "hangwatch/forensics/proc_snapshot.h"
#include "hangwatch/forensics/ptrace_session.h"
#include "hangwatch/forensics/wait_manager.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"

using namespace hangwatch::forensics;

namespace {

constexpr int kWorkers = 4;
int g_signalled_fd = -1;  // the child's SIGUSR1 handler writes "U" here

// A child whose main thread and kWorkers threads block in read() on one pipe; it
// says "R" when they are all up, and exits 0 only after every thread got its byte.
// Proves that a collection let go: blocking syscalls resume and see the data.
class BlockedChild {
 public:
  BlockedChild() {
    REQUIRE(pipe(release_) == 0);
    REQUIRE(pipe(ready_) == 0);
    REQUIRE(pipe(signalled_) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) runChild();
    close(release_[0]);
    close(ready_[1]);
    close(signalled_[1]);
    char c = 0;
    REQUIRE(read(ready_[0], &c, 1) == 1);
    waitForState([](char s) { return s == 'S'; });
  }
  ~BlockedChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, __WALL);
    }
    close(release_[1]);
    close(ready_[0]);
    close(signalled_[0]);
  }

  pid_t pid() const { return pid_; }

  // Whether the child's SIGUSR1 handler ran within `seconds`.
  bool handledSignal(double seconds) {
    pollfd p{signalled_[0], POLLIN, 0};
    char c = 0;
    return poll(&p, 1, static_cast<int>(seconds * 1000)) == 1 && read(signalled_[0], &c, 1) == 1 && c == 'U';
  }

  // Lets every thread go and returns the child's exit code.
  int releaseAndWait() {
    for (int i = 0; i <= kWorkers; ++i) REQUIRE(write(release_[1], "x", 1) == 1);
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Every thread's /proc state letter satisfies `ok` (within a second).
  template <typename F>
  bool waitForState(F ok) {
    for (int i = 0; i < 200; ++i) {
      auto snapshot = readProcSnapshot(pid_);
      bool all = snapshot.ok();
      for (const ProcThread& t : all ? snapshot->threads : std::vector<ProcThread>{}) {
        all = all && !t.state.empty() && ok(t.state[0]);
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  [[noreturn]] void runChild() {
    close(release_[1]);
    close(ready_[0]);
    close(signalled_[0]);
    struct sigaction sa {};
    sa.sa_handler = [](int) { (void)!write(g_signalled_fd, "U", 1); };
    sa.sa_flags = SA_RESTART;
    g_signalled_fd = signalled_[1];
    sigaction(SIGUSR1, &sa, nullptr);
    pthread_t threads[kWorkers];
    for (pthread_t& t : threads) {
      pthread_create(&t, nullptr, [](void* fd) -> void* {
        char c;
        return read(*static_cast<int*>(fd), &c, 1) == 1 ? nullptr : reinterpret_cast<void*>(1);
      }, &release_[0]);
    }
    while (readProcSnapshot(getpid())->threads.size() < kWorkers + 1) usleep(1000);
    (void)!write(ready_[1], "R", 1);
    char c;
    bool ok = read(release_[0], &c, 1) == 1;
    for (pthread_t& t : threads) {
      void* r = nullptr;
      pthread_join(t, &r);
      ok = ok && r == nullptr;
    }
    _exit(ok ? 0 : 1);
  }

  int release_[2];
  int ready_[2];
  int signalled_[2];
  pid_t pid_ = -1;
};

std::string tempJobDir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("forensics-test-" + std::to_string(getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

bool hasFrame(const hangwatch::ThreadStack& t, const std::string& fragment) {
  for (const auto& f : t.frames) {
    if (f.function.find(fragment) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("WaitManagerReportsAChildsExitAndThenForgetsTheNumber") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(3);
  WaitManager waits;
  WaitStatus s = waits.waitFor(pid, deadlineIn(5));
  CHECK(s.kind == WaitStatus::Kind::kExited);
  CHECK(s.code == 3);
  CHECK(waits.reaped(pid));
  CHECK(waits.waitFor(pid, deadlineIn(1)).kind == WaitStatus::Kind::kNotOurs);
}

TEST_CASE("WaitManagerTimesOutOnALiveChildWithoutTouchingIt") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  WaitManager waits;
  auto start = Clock::now();
  CHECK(waits.waitFor(pid, deadlineIn(0.05)).kind == WaitStatus::Kind::kTimedOut);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(50));
  CHECK_FALSE(waits.reaped(pid));
  kill(pid, SIGKILL);
  WaitStatus s = waits.waitFor(pid, deadlineIn(5));
  CHECK(s.kind == WaitStatus::Kind::kKilled);
  CHECK(s.signal == SIGKILL);
}

TEST_CASE("PtraceSessionStopsEveryThreadAndLetsThemResumeTheirSyscalls") {
  BlockedChild child;
  WaitManager waits;
  {
    PtraceSession session(child.pid(), waits);
    auto stopped = session.stopAll(deadlineIn(5));
    REQUIRE(stopped.ok());
    CHECK(*stopped == kWorkers + 1);
    for (const TracedThread& t : session.threads()) {
      CHECK(t.stopped);
      CHECK(t.fs_base != 0);
    }
    CHECK(child.waitForState([](char s) { return s == 't'; }));
  }
  CHECK(child.waitForState([](char s) { return s == 'S'; }));
  CHECK(child.releaseAndWait() == 0);
}

TEST_CASE("CollectorUnwindsEveryThreadOfABlockedChildAndLeavesItRunning") {
  BlockedChild child;
  CollectOptions o;
  o.pid = child.pid();
  o.rank = 3;
  o.out_dir = tempJobDir();
  o.backend = "host";
  CollectResult r = Collector(o).run();
  INFO(r.summary);
  CHECK(r.exit_code == kCollectOk);
  CHECK(r.dump_path == o.out_dir + "/ranks/r00003.forensics.json");
  CHECK(std::filesystem::exists(r.dump_path));
  REQUIRE(r.dump.threads.size() == kWorkers + 1);
  for (const auto& t : r.dump.threads) {
    INFO("thread " << t.tid);
    CHECK(hasFrame(t, "read"));
    CHECK(t.state == "S");
  }
  const auto& main = r.dump.threads.front();
  CHECK(main.tid == child.pid());
  CHECK(hasFrame(main, "runChild"));
  CHECK_FALSE(main.frames.front().module.empty());
  CHECK(main.frames.front().offset.has_value());
  CHECK(r.dump.unwinder == "libdwfl");
  CHECK(child.waitForState([](char s) { return s == 'S'; }));
  CHECK(child.releaseAndWait() == 0);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("ASignalThatArrivesWhileTheTargetIsHeldIsDeliveredAfterwards") {
  BlockedChild child;
  pid_t pid = child.pid();
  CollectOptions o;
  o.pid = pid;
  o.out_dir = tempJobDir();
  o.backend = "host";
  o.while_stopped = [pid] { kill(pid, SIGUSR1); };
  CollectResult r = Collector(o).run();
  CHECK(r.exit_code == kCollectOk);
  CHECK(child.handledSignal(5));
  CHECK(child.releaseAndWait() == 0);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("CollectorLeavesAProcessStoppedBySomeoneElseStopped") {
  BlockedChild child;
  kill(child.pid(), SIGSTOP);
  REQUIRE(child.waitForState([](char s) { return s == 'T'; }));
  CollectOptions o;
  o.pid = child.pid();
  o.out_dir = tempJobDir();
  o.backend = "host";
  CollectResult r = Collector(o).run();
  INFO(r.summary);
  CHECK(r.exit_code == kCollectOk);
  CHECK(r.dump.threads.size() == kWorkers + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(readProcessState(child.pid())[0] == 'T');
  kill(child.pid(), SIGCONT);
  CHECK(child.releaseAndWait() == 0);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("CollectorOfAZombieExplainsAndKeepsWhatProcShows") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(0);
  while (readProcessState(pid)[0] != 'Z') std::this_thread::sleep_for(std::chrono::milliseconds(2));
  CollectOptions o;
  o.pid = pid;
  o.out_dir = tempJobDir();
  CollectResult r = Collector(o).run();
  CHECK(r.exit_code == kCollectFailed);
  CHECK(r.summary.find("zombie") != std::string::npos);
  CHECK_FALSE(r.dump_path.empty());
  REQUIRE(r.dump.threads.size() == 1);
  CHECK(r.dump.threads[0].state == "Z");
  CHECK(waitpid(pid, nullptr, 0) == pid);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("CollectorOfATargetThatDiesWhileHeldReportsTheExitWithoutCrashing") {
  BlockedChild child;
  pid_t pid = child.pid();
  CollectOptions o;
  o.pid = pid;
  o.out_dir = tempJobDir();
  o.backend = "host";
  o.while_stopped = [pid] { kill(pid, SIGKILL); };
  CollectResult r = Collector(o).run();
  CHECK(r.exit_code == kCollectFailed);
  INFO(r.summary);
  CHECK(r.summary.find("exited during the attach") != std::string::npos);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("DebuggerPhaseTimeBoundKillsAHungDebuggerAndTheTargetRunsOn") {
  BlockedChild child;
  CollectOptions o;
  o.pid = child.pid();
  o.out_dir = tempJobDir();
  o.backend = "sim";
  o.timeout_debugger_s = 0.5;
  o.debugger = (std::filesystem::path(__FILE__).parent_path().parent_path() / "programs" / "stuck_debugger.py").string();
  auto start = Clock::now();
  CollectResult r = Collector(o).run();
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  INFO(r.summary);
  CHECK(r.exit_code == kCollectDegraded);
  REQUIRE(r.dump.phases.back().name == "debugger");
  CHECK_FALSE(r.dump.phases.back().ok);
  CHECK(r.dump.phases.back().error.find("hard time bound") != std::string::npos);
  CHECK(r.dump.threads.size() == kWorkers + 1);
  CHECK(child.waitForState([](char s) { return s == 'S'; }));
  CHECK(child.releaseAndWait() == 0);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("ATargetKilledUnderTheDebuggerKeepsItsStacksAndTheDumpAndStateSaySo") {
  BlockedChild child;
  CollectOptions o;
  o.pid = child.pid();
  o.rank = 3;
  o.mark_state = true;
  o.out_dir = tempJobDir();
  o.backend = "sim";
  o.debugger = (std::filesystem::path(__FILE__).parent_path().parent_path() / "programs" / "killing_debugger.py").string();
  CollectResult r = Collector(o).run();
  INFO(r.summary);
  CHECK(r.exit_code == kCollectDegraded);
  CHECK(r.dump.target_exited_during == "debugger");
  CHECK(r.dump.threads.size() == kWorkers + 1);
  bool said = false;
  for (const std::string& e : r.dump.errors) said = said || e.find("exited during the debugger phase") != std::string::npos;
  CHECK(said);
  CHECK_FALSE(r.dump_path.empty());
  auto state = hangwatch::readRankState(hangwatch::rankStatePath(o.out_dir, 3));
  REQUIRE(state.ok());
  CHECK(state->done());
  CHECK(state->forensics == "degraded");
  CHECK(state->note == "process exited during the debugger phase");
  CHECK(state->collector_pid == 0);
  std::filesystem::remove_all(o.out_dir);
}

TEST_CASE("MissingDebuggerIsANoteNotAFailedCollection") {
  BlockedChild child;
  CollectOptions o;
  o.pid = child.pid();
  o.out_dir = tempJobDir();
  o.backend = "sim";
  o.debugger = "/nonexistent/gdb";
  CollectResult r = Collector(o).run();
  CHECK(r.exit_code == kCollectDegraded);
  REQUIRE(r.dump.phases.back().name == "debugger");
  CHECK(r.dump.phases.back().error.find("/nonexistent/gdb") != std::string::npos);
  CHECK(r.dump.threads.size() == kWorkers + 1);
  CHECK(child.releaseAndWait() == 0);
  std::filesystem::remove_all(o.out_dir);
}
