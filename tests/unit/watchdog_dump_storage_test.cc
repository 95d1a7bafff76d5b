// The dump folder on storage that stalls or fails (dump_storage.h): no caller waits past the
// deadline, and what cannot go to the dump folder goes to the same place under the fallback.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/watchdog/dump_storage.h"
#include "test_env.h"

using hangwatch::Expected;
using hangwatch::Written;
using hangwatch::watchdog::DumpStorage;
using hangwatch::watchdog::DumpStorageConfig;
using hangwatch::watchdog::fallbackRootFromEnv;
using test_support::envOf;

// Named, not anonymous: the unity build puts this file in one unit with others.
namespace dump_storage_test {

using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(dump_storage_test::Clock::now() - t).count(); }

struct Folders {
  test_support::TempDir dir{"hangwatch-storage"};
  std::string primary = dir.path + "/shared/job";
  std::string fallback = dir.path + "/local/job";
  DumpStorageConfig config(double deadline_s) const { return {primary, fallback, deadline_s, ""}; }
};

// A call the test holds on the storage thread until it lets it go, as a stalled mount would.
struct HeldCall {
  std::shared_ptr<std::promise<void>> release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  std::shared_ptr<std::atomic<bool>> running = std::make_shared<std::atomic<bool>>(false);
  std::function<Expected<bool>()> op() const {
    return [f = released, running = running] {
      running->store(true);
      f.wait();
      return Expected<bool>(true);
    };
  }
  // The storage thread is in the call (up to 10 s: a loaded sanitizer run may take a while).
  bool waitRunning() const {
    for (int i = 0; i < 2000 && !running->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return running->load();
  }
  void letGo() {
    release->set_value();
    release = std::make_shared<std::promise<void>>();  // the destructor's own
  }
  ~HeldCall() { release->set_value(); }
};

// A call the storage thread is in, held until the test lets it go.
struct CallInFlight {
  HeldCall held;
  std::future<Expected<bool>> answer;
  explicit CallInFlight(DumpStorage& storage)
      : answer(std::async(std::launch::async, [&storage, op = held.op()] { return storage.call<bool>("writing the timeline", op); })) {
    REQUIRE(held.waitRunning());
  }
};

}  // namespace dump_storage_test

using dump_storage_test::Folders;
using dump_storage_test::HeldCall;
using dump_storage_test::secondsSince;

TEST_CASE("TheFallbackFolderIsTheEnvironmentsElseTmpdirsElseVarTmp") {
  CHECK(fallbackRootFromEnv(envOf({{"HANGWATCH_FALLBACK_DIR", "/scratch/hw"}, {"TMPDIR", "/t"}})) == "/scratch/hw");
  CHECK(fallbackRootFromEnv(envOf({{"TMPDIR", "/t"}})) == "/t/hangwatch-fallback");
  CHECK(fallbackRootFromEnv(envOf({})) == "/var/tmp/hangwatch-fallback");
}

TEST_CASE("OnHealthyStorageFilesGoToTheDumpFolderInOrder") {
  Folders f;
  DumpStorage storage(f.config(5));
  Expected<Written> w = storage.write(f.primary + "/ranks/r00000.watchdog.json", "{}\n");
  REQUIRE(w);
  CHECK(w->path == f.primary + "/ranks/r00000.watchdog.json");
  for (int i = 0; i < 5; ++i) storage.appendLater(f.primary + "/metrics/r00000.jsonl", std::to_string(i) + "\n");
  storage.writeLater(f.primary + "/metrics/r00000.timeline.json", "one");
  storage.writeLater(f.primary + "/metrics/r00000.timeline.json", "two");
  REQUIRE(storage.drain(5));
  CHECK(dump_storage_test::slurp(f.primary + "/metrics/r00000.jsonl") == "0\n1\n2\n3\n4\n");
  CHECK(dump_storage_test::slurp(f.primary + "/metrics/r00000.timeline.json") == "two");
  CHECK_FALSE(storage.fellBack());
  CHECK_FALSE(std::filesystem::exists(f.fallback));
}

TEST_CASE("ACallPastTheDeadlineReturnsThenAndTheRanksFilesGoToTheFallback") {
  Folders f;
  DumpStorage storage(f.config(0.3));
  std::vector<std::string> told;
  storage.onFallback([&](const std::string& why, const std::string& where) { told.push_back(why + " -> " + where); });
  HeldCall held;
  const auto start = dump_storage_test::Clock::now();
  Expected<bool> r = storage.call<bool>("reading TRIGGER.beacon", held.op());
  const double waited = secondsSince(start);
  REQUIRE_FALSE(r);
  CHECK(waited >= 0.29);
  CHECK(waited < 2);
  CHECK(r.error().find("stalled: reading TRIGGER.beacon took more than 0.3 s") != std::string::npos);
  CHECK(storage.fellBack());
  REQUIRE(told.size() == 1);
  CHECK(told[0] == "stalled: reading TRIGGER.beacon took more than 0.3 s -> " + f.fallback);

  // From now on nothing waits: a call is refused at once, a write goes to the fallback.
  const auto again = dump_storage_test::Clock::now();
  CHECK_FALSE(storage.call<bool>("reading TRIGGER.beacon", [] { return Expected<bool>(true); }));
  Expected<Written> w = storage.write(f.primary + "/attempts/b/ranks/r00003.watchdog.json", "{\"rank\":3}\n");
  CHECK(secondsSince(again) < 0.5);
  REQUIRE(w);
  CHECK(w->path == f.fallback + "/attempts/b/ranks/r00003.watchdog.json");
  CHECK(dump_storage_test::slurp(w->path) == "{\"rank\":3}\n");
  CHECK(storage.place(f.primary + "/ranks") == f.fallback + "/ranks");
  CHECK(storage.place("/elsewhere/x") == "/elsewhere/x");
  CHECK(told.size() == 1);
}

TEST_CASE("ACallOfSeveralSlowOperationsEachWithinTheDeadlineIsNotStalled") {
  // TRIGGER.json and then its beacon line on a mount that takes 5 s per write against a
  // deadline of 10 s: together past the deadline, each within it.
  Folders f;
  DumpStorage storage(f.config(1.0));
  const std::string beacon = f.primary + "/TRIGGER.beacon";
  const auto start = dump_storage_test::Clock::now();
  Expected<bool> r = storage.call<bool>("writing TRIGGER.json", [beacon] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      if (!hangwatch::dumpFs().append(beacon, "line\n", 0644, false, false)) return Expected<bool>(false);
    }
    return Expected<bool>(true);
  });
  CHECK(secondsSince(start) >= 1.5);
  REQUIRE(r);
  CHECK(*r);
  CHECK_FALSE(storage.fellBack());
  CHECK(dump_storage_test::slurp(beacon) == "line\nline\nline\nline\n");
}

TEST_CASE("AnAppendStalledOnTheMountNeverBlocksTheCallerAndTheLinesAfterItGoToTheFallback") {
  Folders f;
  std::filesystem::create_directories(f.primary + "/metrics");
  // A FIFO nobody reads: opening it for writing blocks, as a write to a stalled mount does.
  const std::string stalled = f.primary + "/metrics/r00001.jsonl";
  REQUIRE(::mkfifo(stalled.c_str(), 0600) == 0);
  DumpStorage storage(f.config(0.2));
  const auto start = dump_storage_test::Clock::now();
  storage.appendLater(stalled, "window 1\n");
  storage.appendLater(stalled, "window 2\n");
  CHECK(secondsSince(start) < 0.5);  // queued, not written: a blocked call would never return
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The next one notices the stall: the queued line and this one go to the fallback, in order.
  storage.appendLater(stalled, "window 3\n");
  CHECK(secondsSince(start) < 1);
  CHECK(storage.fellBack());
  CHECK(storage.why().find("stalled: appending to " + stalled) != std::string::npos);
  CHECK(dump_storage_test::slurp(f.fallback + "/metrics/r00001.jsonl") == "window 2\nwindow 3\n");
  CHECK(storage.linesLost() == 1);
  // Let the stuck open go (a reader) so the thread ends its line where nobody looks.
  const int reader = ::open(stalled.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  CHECK(storage.drain(5));
  ::close(reader);
}

TEST_CASE("AFolderThatFailsAWriteIsGivenUpAndTheFileGoesToTheFallback") {
  Folders f;
  std::filesystem::create_directories(std::filesystem::path(f.primary).parent_path());
  std::ofstream(f.primary) << "a file where the job's folder should be\n";  // ENOTDIR, as EROFS or EIO would
  DumpStorage storage(f.config(5));
  Expected<Written> w = storage.write(f.primary + "/ranks/r00002.watchdog.json", "{}\n");
  REQUIRE(w);
  CHECK(w->path == f.fallback + "/ranks/r00002.watchdog.json");
  CHECK(storage.fellBack());
  CHECK(storage.why().find(f.primary + "/ranks") != std::string::npos);
  storage.appendLater(f.primary + "/metrics/r00002.jsonl", "w\n");
  REQUIRE(storage.drain(5));
  CHECK(dump_storage_test::slurp(f.fallback + "/metrics/r00002.jsonl") == "w\n");
}

TEST_CASE("AFileOutsideTheDumpFolderThatCannotBeWrittenHasNoFallback") {
  Folders f;
  DumpStorage storage(f.config(5));
  std::ofstream(f.dir.path + "/plain") << "x";
  Expected<Written> w = storage.write(f.dir.path + "/plain/node.prom", "x");
  CHECK_FALSE(w);
  CHECK_FALSE(storage.fellBack());
}

TEST_CASE("GivenUpAtStartTheFolderSaysWhyOnce") {
  Folders f;
  DumpStorage storage(f.config(5));
  int told = 0;
  storage.onFallback([&](const std::string&, const std::string&) { ++told; });
  storage.giveUp("cannot create " + f.primary + ": Read-only file system");
  storage.giveUp("again");
  CHECK(told == 1);
  CHECK(storage.why() == "cannot create " + f.primary + ": Read-only file system");
  Expected<Written> w = storage.write(f.primary + "/TRIGGER.json", "{}\n");
  REQUIRE(w);
  CHECK(w->path == f.fallback + "/TRIGGER.json");
}

TEST_CASE("ClosedBeforeTheProcessEndsTheOperationInFlightFinishesAndNothingNewStarts") {
  // HANGWATCH_ON_HANG=abort ends the rank with _exit while the poller still queues metrics: an
  // operation cut off between its temporary file and the rename would leave the file behind.
  Folders f;
  DumpStorage storage(f.config(5));
  dump_storage_test::CallInFlight in_flight(storage);
  auto closed = std::async(std::launch::async, [&] { return storage.close(5); });
  CHECK(closed.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  in_flight.held.letGo();
  REQUIRE(closed.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(closed.get());
  CHECK(in_flight.answer.get());

  // Closed: nothing is written any more, and nothing waits.
  const auto start = dump_storage_test::Clock::now();
  storage.writeLater(f.primary + "/timeline/r00001.json", "{}");
  storage.appendLater(f.primary + "/metrics/r00001.jsonl", "w\n");
  Expected<Written> w = storage.write(f.primary + "/ranks/r00001.watchdog.json", "{}\n");
  CHECK_FALSE(w);
  CHECK(storage.drain(1));
  CHECK(secondsSince(start) < 0.5);
  CHECK_FALSE(std::filesystem::exists(f.primary));
  CHECK_FALSE(std::filesystem::exists(f.fallback));
  CHECK_FALSE(storage.fellBack());  // closing is no storage failure
}

TEST_CASE("CloseGivesAStalledOperationItsBoundAndNoMore") {
  Folders f;
  DumpStorage storage(f.config(30));
  dump_storage_test::CallInFlight in_flight(storage);
  const auto start = dump_storage_test::Clock::now();
  CHECK_FALSE(storage.close(0.3));
  CHECK(secondsSince(start) >= 0.29);
  CHECK(secondsSince(start) < 2);
  in_flight.held.letGo();
  CHECK(in_flight.answer.get());
}

TEST_CASE("AfterTheFolderWasGivenUpCloseStillStopsTheFallbackWrites") {
  Folders f;
  DumpStorage storage(f.config(5));
  storage.giveUp("cannot create " + f.primary + ": Read-only file system");
  storage.writeLater(f.primary + "/timeline/r00002.json", "before");
  REQUIRE(storage.close(1));
  storage.writeLater(f.primary + "/timeline/r00002.json", "after");
  storage.appendLater(f.primary + "/metrics/r00002.jsonl", "after\n");
  CHECK(dump_storage_test::slurp(f.fallback + "/timeline/r00002.json") == "before");
  CHECK_FALSE(std::filesystem::exists(f.fallback + "/metrics/r00002.jsonl"));
  CHECK_FALSE(storage.write(f.primary + "/ranks/r00002.watchdog.json", "{}\n"));
}
