// The storage thread's helper process (io_helper.h): every dump-folder operation does there
// what it does here, an operation that never returns holds the helper and not the thread that
// asked, and a helper that is gone leaves the operations to this process, said once.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/watchdog/dump_storage.h"
#include "hangwatch/watchdog/io_helper.h"
#include "test_env.h"

using hangwatch::Expected;
using hangwatch::watchdog::DumpStorage;
using hangwatch::watchdog::IoHelper;

// Named, not anonymous: the unity build puts this file in one unit with others.
namespace io_helper_test {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::unique_ptr<IoHelper> startHelper(std::vector<std::string>* told = nullptr) {
  auto helper = IoHelper::start(IO_HELPER_FIXTURE, [told](const std::string& m) {
    if (told) told->push_back(m);
  });
  REQUIRE(helper);
  return std::move(*helper);
}

// The first fields of /proc/<pid>/task/<tid>/syscall: the system call a blocked thread is in
// and its first argument (a file descriptor for read and openat).
struct InSyscall {
  long number = -1;
  long first_arg = -1;
};

InSyscall syscallOf(const std::string& task_dir) {
  std::istringstream in(slurp(task_dir + "/syscall"));
  InSyscall s;
  std::string arg;
  in >> s.number >> arg;
  if (!arg.empty()) s.first_arg = std::stol(arg, nullptr, 16);
  return s;
}

// Waits until the task is blocked in `number`: up to 10 s, as a ThreadSanitizer build at -j2
// on two cores may take seconds to get a thread there.
bool waitInSyscall(const std::string& task_dir, long number) {
  for (int i = 0; i < 1000; ++i) {
    if (syscallOf(task_dir).number == number) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The child's wait status once it ends within `seconds`; nothing when it has not.
std::optional<int> reapWithin(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

pid_t parentOf(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string state;
  pid_t ppid = 0;
  fields >> state >> ppid;
  return ppid;
}

// A FIFO that nobody writes: opening it for reading blocks, as a call on a stalled mount does.
struct Fifo {
  test_support::TempDir dir{"hangwatch-iohelper"};
  std::string path = dir.path + "/stalled";
  Fifo() { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }
  void release() const {
    // Opening the write end lets the blocked open return; the reader then sees EOF.
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
};

// The rank's end as its helper sees it: the thread that started the helper ends (its
// PR_SET_PDEATHSIG), here while the helper is held in an operation (a FIFO's open).
struct RankThatEnds {
  std::unique_ptr<IoHelper> helper;
  std::promise<void> started, end;
  std::thread starter;
  RankThatEnds() {
    starter = std::thread([this] {
      if (auto h = IoHelper::start(IO_HELPER_FIXTURE, {})) helper = std::move(*h);
      started.set_value();
      end.get_future().wait();
    });
    started.get_future().wait();
    if (!helper) {  // the destructor does not run when the constructor throws
      end.set_value();
      starter.join();
    }
    REQUIRE(helper);
  }
  bool endWhileTheHelperIsInOpen() {
    const std::string task = "/proc/" + std::to_string(helper->pid()) + "/task/" + std::to_string(helper->pid());
    const bool in_open = waitInSyscall(task, SYS_openat);
    end.set_value();
    starter.join();
    return in_open;
  }
  ~RankThatEnds() {
    if (starter.joinable()) {
      end.set_value();
      starter.join();
    }
  }
};

}  // namespace io_helper_test

using io_helper_test::slurp;
using io_helper_test::startHelper;

TEST_CASE("EveryDumpFolderOperationThroughTheHelperProcessDoesWhatItDoesHere") {
  test_support::TempDir dir{"hangwatch-iohelper"};
  std::unique_ptr<IoHelper> helper = startHelper();
  CHECK(helper->pid() != ::getpid());
  CHECK(io_helper_test::parentOf(helper->pid()) == ::getpid());

  const std::string file = dir.path + "/job/ranks/r00000.watchdog.json";
  int steps = 0;
  Expected<hangwatch::Written> w = helper->writeAtomically(file, "{\"rank\":0}\n", 0640, [&] { ++steps; });
  REQUIRE(w);
  CHECK(w->path == file);
  CHECK(steps == 3);  // created, written, flushed: the deadline counts from each
  CHECK(slurp(file) == "{\"rank\":0}\n");
  CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::all) ==
        static_cast<std::filesystem::perms>(0640));

  const std::string trigger = dir.path + "/job/TRIGGER.json";
  Expected<bool> first = helper->createExclusively(trigger, "first\n", 0640);
  REQUIRE(first);
  CHECK(*first);
  Expected<bool> second = helper->createExclusively(trigger, "second\n", 0640);
  REQUIRE(second);
  CHECK_FALSE(*second);
  CHECK(slurp(trigger) == "first\n");

  Expected<std::string> read = helper->read(trigger, 1024, false, 0);
  REQUIRE(read);
  CHECK(*read == "first\n");
  CHECK(*helper->read(trigger, 3, false, 0) == "fir");
  Expected<std::string> missing = helper->read(dir.path + "/job/nothing", 1024, false, 0);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().rfind("no such file", 0) == 0);
  const std::string beacon = dir.path + "/other/TRIGGER.beacon";
  Expected<std::string> made = helper->read(beacon, 1024, true, 0640);
  REQUIRE(made);
  CHECK(made->empty());
  CHECK(std::filesystem::is_regular_file(beacon));

  std::optional<hangwatch::FileStat> st = helper->stat(trigger);
  REQUIRE(st);
  CHECK(st->size == 6);
  CHECK_FALSE(st->is_dir);
  CHECK(st->mtime_unix_s > 1.6e9);
  CHECK(helper->stat(dir.path + "/job")->is_dir);
  CHECK_FALSE(helper->stat(dir.path + "/job/nothing"));

  Expected<bool> made_dirs = helper->makeDirs(dir.path + "/a/b/c", 0750);
  REQUIRE(made_dirs);
  CHECK(*made_dirs);
  Expected<bool> there_already = helper->makeDirs(dir.path + "/a/b/c", 0750);
  REQUIRE(there_already);
  CHECK_FALSE(*there_already);
  CHECK(std::filesystem::is_directory(dir.path + "/a/b/c"));

  const std::string metrics = dir.path + "/job/metrics/r00000.jsonl";
  for (int i = 0; i < 3; ++i) REQUIRE(helper->append(metrics, std::to_string(i) + "\n", 0640, true, false));
  REQUIRE(helper->append(beacon, "triggered rank=0\n", 0640, false, true));
  CHECK(slurp(metrics) == "0\n1\n2\n");
  CHECK(slurp(beacon) == "triggered rank=0\n");

  // A failure there is the same failure here, with its reason.
  std::filesystem::create_directories(dir.path + "/ro");
  const std::string blocked = dir.path + "/job/ranks/r00000.watchdog.json/under-a-file";
  Expected<hangwatch::Written> refused = helper->writeAtomically(blocked, "x", 0640, {});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("Not a directory") != std::string::npos);
  CHECK_FALSE(helper->gone());
}

TEST_CASE("AnOperationThatNeverReturnsHoldsTheHelperNotTheThreadThatAsked") {
  io_helper_test::Fifo fifo;
  std::unique_ptr<IoHelper> helper = startHelper();
  std::atomic<pid_t> asker{0};
  std::atomic<bool> returned{false};
  std::thread asking([&] {
    asker = static_cast<pid_t>(::syscall(SYS_gettid));
    (void)helper->read(fifo.path, 1024, false, 0);
    returned = true;
  });
  const std::string helper_task = "/proc/" + std::to_string(helper->pid()) + "/task/" + std::to_string(helper->pid());
  // The helper is the one in the open() that does not return...
  const bool helper_blocked = io_helper_test::waitInSyscall(helper_task, SYS_openat);
  // ...and the thread that asked waits in a read() on its socket, which a signal, the
  // process's exit and ptrace all interrupt.
  while (asker.load() == 0) std::this_thread::yield();
  const std::string asker_task = "/proc/self/task/" + std::to_string(asker.load());
  const bool asker_reading = io_helper_test::waitInSyscall(asker_task, SYS_read);
  const long fd = io_helper_test::syscallOf(asker_task).first_arg;
  std::error_code no_fd;  // not in read() after all: a failed CHECK below, not an exception
  const std::string what = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), no_fd).string();
  fifo.release();
  asking.join();
  CHECK(helper_blocked);
  CHECK(asker_reading);
  CHECK(what.rfind("socket:", 0) == 0);
  CHECK(returned);
}

TEST_CASE("WhenTheHelperIsGoneTheOperationsRunHereAndThatIsSaidOnce") {
  test_support::TempDir dir{"hangwatch-iohelper"};
  std::vector<std::string> told;
  std::unique_ptr<IoHelper> helper = startHelper(&told);
  REQUIRE(helper->writeAtomically(dir.path + "/before", "1", 0640, {}));
  REQUIRE(::kill(helper->pid(), SIGKILL) == 0);
  REQUIRE(::waitpid(helper->pid(), nullptr, 0) == helper->pid());
  CHECK(helper->writeAtomically(dir.path + "/after", "2", 0640, {}));
  CHECK(helper->append(dir.path + "/lines", "a\n", 0640, true, false));
  CHECK(helper->gone());
  CHECK(slurp(dir.path + "/after") == "2");
  CHECK(slurp(dir.path + "/lines") == "a\n");
  REQUIRE(told.size() == 1);
  CHECK(told[0].find("is gone") != std::string::npos);
  CHECK(told[0].find("does its file operations itself") != std::string::npos);
}

TEST_CASE("TheHelperEndsWithTheThreadThatStartedIt") {
  std::unique_ptr<IoHelper> helper;
  std::thread([&] { helper = startHelper(); }).join();
  // Idle: at once, whether its SIGHUP came before the helper handled it or after.
  const std::optional<int> status = io_helper_test::reapWithin(helper->pid(), 2);
  REQUIRE(status);
  CHECK(((WIFEXITED(*status) && WEXITSTATUS(*status) == 0) || (WIFSIGNALED(*status) && WTERMSIG(*status) == SIGHUP)));
}

TEST_CASE("AFileOperationInFlightWhenTheRankEndsIsFinishedBeforeTheHelperGoes") {
  // A rank killed while its helper writes one of its files (a launcher's SIGKILL, the job's
  // SIGTERM passed on after the dumps) must not leave the file under its temporary name: the
  // helper finishes what it is doing, then goes. Held here in a FIFO's open, as a slow mount.
  io_helper_test::Fifo fifo;
  io_helper_test::RankThatEnds rank;
  IoHelper* helper = rank.helper.get();
  std::atomic<bool> answered{false};
  std::thread asking([&] { answered = helper->read(fifo.path, 1024, false, 0).ok() && !helper->gone(); });
  REQUIRE(rank.endWhileTheHelperIsInOpen());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(::waitpid(helper->pid(), nullptr, WNOHANG) == 0);  // still at its operation
  fifo.release();
  asking.join();
  CHECK(answered);  // done by the helper, not by this process after the helper died
  const std::optional<int> status = io_helper_test::reapWithin(helper->pid(), 2);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
}

TEST_CASE("AnOperationThatDoesNotFinishAfterTheRankEndedEndsTheHelperWithinItsBound") {
  io_helper_test::Fifo fifo;
  io_helper_test::RankThatEnds rank;
  IoHelper* helper = rank.helper.get();
  std::thread asking([&] { (void)helper->read(fifo.path, 1024, false, 0); });
  REQUIRE(rank.endWhileTheHelperIsInOpen());
  const auto start = std::chrono::steady_clock::now();
  const std::optional<int> status = io_helper_test::reapWithin(helper->pid(), 10);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The asking thread does the read itself once the helper is gone: let it return.
  fifo.release();
  asking.join();
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGALRM);
  CHECK(took > 2);
  CHECK(took < 6);
}

TEST_CASE("TheStorageThreadWaitsOnItsHelperNotOnAStalledFolder") {
  test_support::TempDir dir{"hangwatch-iohelper"};
  io_helper_test::Fifo fifo;
  const std::string primary = dir.path + "/shared/job";
  // A deadline that starting the helper under a loaded machine (ASan, two test jobs) never reaches.
  DumpStorage storage({primary, dir.path + "/local/job", 1.0, IO_HELPER_FIXTURE});
  REQUIRE(storage.write(primary + "/ranks/r00000.watchdog.json", "{}\n"));
  const pid_t helper = storage.ioHelperPid();
  REQUIRE(helper > 0);
  // A look-up that never returns (a FIFO nobody writes, as a stalled mount): past the
  // deadline the folder is given up, and this process has no thread in an open() at all.
  Expected<bool> r = storage.call<bool>("reading TRIGGER.beacon", [path = fifo.path] {
    return Expected<bool>(hangwatch::dumpFs().read(path, 16, false, 0).ok());
  });
  REQUIRE_FALSE(r);
  CHECK(r.error().find("stalled: reading TRIGGER.beacon took more than 1 s") != std::string::npos);
  const std::string helper_task = "/proc/" + std::to_string(helper) + "/task/" + std::to_string(helper);
  CHECK(io_helper_test::waitInSyscall(helper_task, SYS_openat));
  // A thread of ours blocked on the FIFO stays in openat; one seen there once may be the
  // storage thread opening a file in the local fallback folder, which returns at once.
  std::set<std::string> stuck_in_open;
  for (int sample = 0; sample < 5; ++sample) {
    std::set<std::string> now;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
      if (io_helper_test::syscallOf(task.path().string()).number == SYS_openat) now.insert(task.path().string());
    if (sample == 0) {
      stuck_in_open = now;
    } else {
      std::erase_if(stuck_in_open, [&](const std::string& t) { return !now.count(t); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fifo.release();
  CHECK(stuck_in_open.empty());
  CHECK(storage.fellBack());
}
