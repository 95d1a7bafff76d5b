// The trigger shared per node (node_share.h, trigger_watcher.h, TRIGGER.beacon), the job-wide
// completion ranks wait for in abort mode, and SIGTERM held back while dumping.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>
#include <fmt/format.h>

#include "hangwatch/watchdog/hang_responder.h"
#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/common/trigger_beacon.h"
#include "hangwatch/watchdog/job_completion.h"
#include "hangwatch/watchdog/node_share.h"
#include "hangwatch/watchdog/term_deferral.h"
#include "hangwatch/watchdog/trigger_watcher.h"
#include "test_env.h"

using namespace hangwatch;
using namespace hangwatch::watchdog;
namespace fs = std::filesystem;

using test_support::TempDir;

using test_support::kMs;

namespace {

constexpr int64_t kInterval = 250 * kMs;

// A node's ranks: each attaches to the board in `shm` (a private directory standing in for
// /dev/shm) and watches the trigger through it.
struct Node {
  std::vector<std::unique_ptr<NodeShare>> boards;
  std::vector<std::unique_ptr<TriggerWatcher>> ranks;
  Node(const std::string& job, const std::string& shm, int n) {
    for (int i = 0; i < n; ++i) {
      auto b = NodeShare::attach(job, shm);
      REQUIRE(b.ok());
      boards.push_back(std::move(*b));
      ranks.push_back(std::make_unique<TriggerWatcher>(job, kInterval, boards.back().get()));
    }
  }
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TriggerRecord record(int rank) {
  TriggerRecord t;
  t.rank = rank;
  t.host = "node0";
  t.reason = "timeout";
  return t;
}

void writeState(const std::string& job, int rank, DumpPhase phase, double deadline) {
  RankState s;
  s.rank = rank;
  s.phase = phase;
  s.deadline_unix_s = deadline;
  REQUIRE(writeFileAtomically(rankStatePath(job, rank), toJson(s).dump()).ok());
}

}  // namespace

TEST_CASE("EightRanksOfANodeLookAtSharedStorageAtTheRateOfOne") {
  TempDir dir;
  std::string job = dir.path + "/job";
  Node node(job, dir.path, 8);
  // 10 s of healthy job, every rank polling every 10 ms.
  for (int64_t now = 0; now < 10'000 * kMs; now += 10 * kMs) {
    for (auto& r : node.ranks) CHECK_FALSE(r->triggered(now));
  }
  uint64_t lookups = node.boards[0]->lookups();
  // One beacon read per 250 ms per node, plus a stat() of TRIGGER.json every 8th turn.
  CHECK(lookups == 40 + 5);
  CHECK(lookups <= 8 * 10);
  struct stat st;
  CHECK(::stat(triggerBeaconPath(job).c_str(), &st) == 0);  // made on the first look-up, before any trigger
}

TEST_CASE("RanksRacingForTheSameLookupTurnGetExactlyOneWinner") {
  TempDir dir;
  std::string job = dir.path + "/job";
  constexpr int kRanks = 8;
  constexpr int kTurns = 500;
  std::vector<std::unique_ptr<NodeShare>> boards;
  for (int i = 0; i < kRanks; ++i) {
    auto b = NodeShare::attach(job, dir.path);
    REQUIRE(b.ok());
    boards.push_back(std::move(*b));
  }
  std::vector<std::atomic<int>> winners(kTurns);
  std::barrier turn(kRanks);
  std::vector<std::thread> ranks;
  for (int i = 0; i < kRanks; ++i) {
    ranks.emplace_back([&, i] {
      for (int t = 0; t < kTurns; ++t) {
        turn.arrive_and_wait();
        // Every rank sees the same clock reading: one of them looks, the others wait their turn.
        if (boards[i]->claim(NodeShare::Lookup::kTrigger, t * kInterval, kInterval)) winners[t].fetch_add(1);
        if (t % 7 == 0) boards[i]->markTriggered();
      }
    });
  }
  for (auto& r : ranks) r.join();
  int wrong = 0;
  for (auto& w : winners) wrong += w.load() != 1;
  CHECK(wrong == 0);
  CHECK(boards[3]->triggered());
}

TEST_CASE("ATriggerOneRankFiredReachesTheOtherRanksOfItsNodeWithoutALookup") {
  TempDir dir;
  std::string job = dir.path + "/job";
  Node node(job, dir.path, 4);
  CHECK_FALSE(node.ranks[1]->triggered(0));
  uint64_t before = node.boards[0]->lookups();
  auto won = node.ranks[0]->fire(record(0));
  REQUIRE(won.ok());
  CHECK(*won);
  for (int i = 1; i < 4; ++i) CHECK(node.ranks[i]->triggered(1 * kMs));  // before the next turn
  CHECK(node.boards[0]->lookups() == before);
}

TEST_CASE("AnotherNodesTriggerIsSeenFromTheBeaconAloneWhileTriggerJsonStaysInvisible") {
  // On NFS this node may keep a negative lookup of TRIGGER.json cached for a minute; the
  // beacon it opens and reads is what must carry the news. Here TRIGGER.json never shows.
  TempDir dir;
  std::string job = dir.path + "/job";
  Node node(job, dir.path, 2);
  CHECK_FALSE(node.ranks[0]->triggered(0));
  REQUIRE(TriggerBeacon(job).append(beaconTriggerLine(5, "node9", 77, 1.0)).ok());
  CHECK_FALSE(node.ranks[1]->triggered(100 * kMs));  // not this node's turn yet
  CHECK(node.ranks[1]->triggered(kInterval));
  CHECK(node.ranks[0]->triggered(kInterval + 1));
  CHECK_FALSE(fs::exists(triggerPath(job)));
}

TEST_CASE("AnEarlyWarningReachesEveryNodeThroughTheBeaconWithoutTriggering") {
  TempDir dir;
  std::string job = dir.path + "/job";
  fs::create_directories(dir.path + "/here");
  fs::create_directories(dir.path + "/there");
  Node here(job, dir.path + "/here", 2);
  Node there(job, dir.path + "/there", 1);
  TriggerRecord r = record(5);
  r.reason = "no-progress";
  auto created = there.ranks[0]->fireSuspect(r, 1);
  REQUIRE(created.ok());
  CHECK(*created);
  CHECK(fs::exists(suspectPath(job)));
  CHECK(there.ranks[0]->suspectedEpisode() == 1);
  CHECK(here.ranks[0]->suspectedEpisode() == 0);
  CHECK_FALSE(here.ranks[1]->triggered(0));  // the node's look-up reads the warning, and is no trigger
  CHECK(here.ranks[0]->suspectedEpisode() == 1);
  // A second rank warning of the same stall adds nothing; a later one is episode 2.
  CHECK_FALSE(*here.ranks[0]->fireSuspect(r, 1));
  CHECK(*here.ranks[0]->fireSuspect(r, 2));
  CHECK(fs::exists(suspectPath(job, 2)));
  CHECK(parseBeacon(readFile(triggerBeaconPath(job)), 0).suspected_episode == 2);
}

TEST_CASE("ATriggerMadeWithoutTheBeaconIsStillSeenByTheStatFallback") {
  TempDir dir;
  std::string job = dir.path + "/job";
  Node node(job, dir.path, 1);
  CHECK_FALSE(node.ranks[0]->triggered(0));
  REQUIRE(createFileExclusively(triggerPath(job), "{}").ok());  // an older tool, or by hand
  bool seen = false;
  int64_t now = 0;
  while (!seen && now < 5'000 * kMs) seen = node.ranks[0]->triggered(now += 10 * kMs);
  CHECK(seen);
  CHECK(now <= TriggerWatcher::kStatEvery * kInterval);
}

TEST_CASE("ABeaconLeftFromAnEarlierRunWithoutItsTriggerDoesNotTrigger") {
  TempDir dir;
  std::string job = dir.path + "/job";
  REQUIRE(TriggerBeacon(job).append(beaconTriggerLine(1, "old", 1, 1.0)).ok());
  Node node(job, dir.path, 2);
  CHECK_FALSE(node.ranks[0]->triggered(0));
  CHECK_FALSE(node.ranks[1]->triggered(kInterval));
  // A fresh trigger of this run: TRIGGER.json and a new beacon line, seen by another node.
  REQUIRE(createFileExclusively(triggerPath(job), "{}").ok());
  REQUIRE(TriggerBeacon(job).append(beaconTriggerLine(1, "new", 2, 2.0)).ok());
  fs::create_directories(dir.path + "/other");
  Node other(job, dir.path + "/other", 1);
  CHECK(other.ranks[0]->triggered(0));
  CHECK_FALSE(node.ranks[0]->triggered(kInterval + 1));  // this node's next turn is later
  CHECK(node.ranks[0]->triggered(2 * kInterval));
}

TEST_CASE("ABoardWhoseMembersAllExitedBelongsToAnEarlierRunAndIsReset") {
  TempDir dir;
  std::string job = dir.path + "/job";
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto b = NodeShare::attach(job, dir.path);
    if (!b.ok()) ::_exit(1);
    (*b)->markTriggered();
    (*b)->markComplete();
    ::_exit(0);  // killed, as it were: never leaves
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WEXITSTATUS(status) == 0);
  auto b = NodeShare::attach(job, dir.path);
  REQUIRE(b.ok());
  CHECK_FALSE((*b)->triggered());
  CHECK_FALSE((*b)->complete());
  // A live member keeps what it set.
  (*b)->markTriggered();
  auto again = NodeShare::attach(job, dir.path);
  REQUIRE(again.ok());
  CHECK((*again)->triggered());
}

TEST_CASE("AMemberThatIsAZombieCountsAsExited") {
  // Nobody reaps in some containers: a killed rank's pid stays in /proc as a zombie.
  TempDir dir;
  std::string job = dir.path + "/job";
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto b = NodeShare::attach(job, dir.path);
    if (!b.ok()) ::_exit(1);
    (*b)->markTriggered();
    ::_exit(0);
  }
  // Not reaped until the board was looked at: the child is a zombie meanwhile.
  for (int i = 0; i < 200; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    if (text.find(") Z ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto b = NodeShare::attach(job, dir.path);
  REQUIRE(b.ok());
  CHECK_FALSE((*b)->triggered());
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("EachAttemptOfAJobFolderHasABoardOfItsOwn") {
  // A restarted job on the same node never meets the board of the launch before it, even
  // while that launch's ranks still live (wait mode keeps a hung job as it is).
  TempDir dir;
  std::string job = dir.path + "/job";
  auto first = NodeShare::attach(job, dir.path, "node0:100:1.000");
  REQUIRE(first.ok());
  (*first)->markTriggered();
  auto second = NodeShare::attach(job, dir.path, "node0:200:2.000");
  REQUIRE(second.ok());
  CHECK((*second)->path() != (*first)->path());
  CHECK_FALSE((*second)->triggered());
}

TEST_CASE("ATriggerWrittenBeforeThisProcessStartedIsAnEarlierLaunchsAndIgnored") {
  TempDir dir;
  std::string job = dir.path + "/job";
  TriggerRecord old = record(3);
  old.time_unix_s = 1000;
  REQUIRE(createFileExclusively(triggerPath(job), toJson(old).dump()).ok());
  REQUIRE(TriggerBeacon(job).append(beaconTriggerLine(3, "node0", 1, 1000)).ok());
  auto board = NodeShare::attach(job, dir.path);
  REQUIRE(board.ok());
  TriggerWatcher started_later(job, kInterval, board->get(), 2000);
  for (int64_t now = 0; now < 20 * kInterval; now += kInterval) CHECK_FALSE(started_later.triggered(now));
  CHECK_FALSE((*board)->triggered());
  TempDir other;
  auto board2 = NodeShare::attach(job, other.path);
  REQUIRE(board2.ok());
  TriggerWatcher started_before(job, kInterval, board2->get(), 999);
  CHECK(started_before.triggered(0));
}

TEST_CASE("TheLastRankToLeaveRemovesTheBoard") {
  TempDir dir;
  std::string job = dir.path + "/job";
  auto b = NodeShare::attach(job, dir.path);
  REQUIRE(b.ok());
  CHECK((*b)->shared());
  CHECK(fs::exists((*b)->path()));
  (*b)->leave();
  CHECK_FALSE(fs::exists((*b)->path()));
}

TEST_CASE("BoardsOfKilledJobsAreRemovedWhenAnotherJobStarts") {
  TempDir dir;
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto b = NodeShare::attach(dir.path + "/killed-job", dir.path);
    ::_exit(b.ok() ? 0 : 1);  // never leaves, as a SIGKILLed rank
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WEXITSTATUS(status) == 0);
  std::string killed = nodeSharePath(dir.path + "/killed-job", dir.path);
  REQUIRE(fs::exists(killed));
  auto live = NodeShare::attach(dir.path + "/live-job", dir.path);
  REQUIRE(live.ok());
  auto next = NodeShare::attach(dir.path + "/next-job", dir.path);
  REQUIRE(next.ok());
  CHECK_FALSE(fs::exists(killed));
  CHECK(fs::exists((*live)->path()));  // its member is alive
}

// Stop 58's CI: a node's two ranks on two boards, so the second asked NCCL's RAS as if alone.
// A board is made with no member and joined right after; a process starting meanwhile (a rank
// of another node sharing /dev/shm, another job's) sweeps it away as an earlier run's. The rank
// that joined it must not stay on a board nobody else finds.
TEST_CASE("ABoardSweptAwayBetweenItsOpenAndTheJoinIsMadeAgainSoTheNodesRanksShareOne") {
  TempDir dir;
  const std::string job = dir.path + "/job";
  const std::string path = nodeSharePath(job, dir.path);
  bool swept = false;
  auto first = NodeShare::attachAt(path, dir.path, 0, [&] {
    if (swept) return;
    swept = true;
    REQUIRE(NodeShare::attach(dir.path + "/another-job", dir.path).ok());  // its start sweeps
  });
  REQUIRE(first.ok());
  CHECK(swept);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto second = NodeShare::attach(job, dir.path, "", 1);
    ::_exit(second.ok() && (*second)->memberRanks() == std::vector<int>{0, 1} ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the second rank found the first on the node's board
}

TEST_CASE("AnUnusableSharedMemoryDirectoryIsAnErrorNotACrash") {
  TempDir dir;
  auto b = NodeShare::attach(dir.path + "/job", dir.path + "/no/such/dir");
  CHECK_FALSE(b.ok());
  auto own = NodeShare::unshared();
  CHECK_FALSE(own->shared());
  CHECK(own->claim(NodeShare::Lookup::kTrigger, 0, kInterval));
  CHECK_FALSE(own->claim(NodeShare::Lookup::kTrigger, 1, kInterval));
}

TEST_CASE("CompletionWaitsForEveryRankAndCountsThosePastTheirDeadline") {
  TempDir dir;
  std::string job = dir.path + "/job";
  JobCompletion completion(job, 4);
  CHECK_FALSE(completion.poll(100));
  CHECK(completion.waitingFor() == 0);
  writeState(job, 0, DumpPhase::kDone, 150);
  writeState(job, 1, DumpPhase::kDone, 150);
  writeState(job, 2, DumpPhase::kCollecting, 150);
  writeState(job, 3, DumpPhase::kDone, 150);
  CHECK_FALSE(completion.poll(100));
  CHECK(completion.waitingFor() == 2);
  CHECK(completion.poll(151));  // rank 2's collector never came back
  CHECK(completion.ranksDone() == 3);
  CHECK(completion.ranksGivenUp() == 1);
}

TEST_CASE("CompletionStopsWaitingForARankThatWroteNoStateOnceTheAnswerWindowPassed") {
  // Rank 2 died alone on its node: nobody writes its state. Rank 3 is collecting, so it is
  // waited for until its own deadline, answer window or not.
  TempDir dir;
  std::string job = dir.path + "/job";
  JobCompletion completion(job, 4, 30);
  writeState(job, 0, DumpPhase::kDone, 150);
  writeState(job, 1, DumpPhase::kDone, 150);
  writeState(job, 3, DumpPhase::kCollecting, 200);
  CHECK_FALSE(completion.poll(100));
  CHECK_FALSE(completion.poll(129));
  CHECK(completion.waitingFor() == 2);
  CHECK_FALSE(completion.poll(130));
  CHECK(completion.waitingFor() == 3);
  CHECK(completion.ranksSilent() == 1);
  // A rank that wrote its state late still counts once it did.
  writeState(job, 3, DumpPhase::kDone, 200);
  CHECK(completion.poll(131));
  CHECK(completion.ranksDone() == 3);
  CHECK(completion.ranksGivenUp() == 1);
}

TEST_CASE("CompletionAnnouncedInTheBeaconReachesARankOfAnotherNode") {
  TempDir dir;
  std::string job = dir.path + "/job";
  Node here(job, dir.path + "/", 1);
  fs::create_directories(dir.path + "/other");
  Node there(job, dir.path + "/other", 1);
  REQUIRE(here.ranks[0]->fire(record(0)).ok());
  CHECK(there.ranks[0]->triggered(0));
  CHECK_FALSE(there.ranks[0]->jobComplete(0));
  REQUIRE(here.ranks[0]->announceComplete(2, 0, 10).ok());
  CHECK(here.ranks[0]->jobComplete(0));
  CHECK_FALSE(there.ranks[0]->jobComplete(10 * kMs));  // one completion look-up per second per node
  CHECK(there.ranks[0]->jobComplete(TriggerWatcher::kCompletionCheckNs));
}

TEST_CASE("DumpPathsNameTheRankOrElseThePid") {
  DumpPaths ranked = dumpPaths("/d/job", 7, 4242);
  CHECK(ranked.snapshot == "/d/job/ranks/r00007.watchdog.json");
  CHECK(ranked.state == "/d/job/ranks/r00007.state.json");
  CHECK(ranked.collect_log == "/d/job/ranks/r00007.collect.log");
  DumpPaths unranked = dumpPaths("/d/job", std::nullopt, 4242);
  CHECK(unranked.snapshot == "/d/job/ranks/p4242.watchdog.json");
  CHECK(unranked.state.empty());
  CHECK(unranked.collect_log == "/d/job/ranks/p4242.collect.log");
}

TEST_CASE("ThePlannedResponseMarksTheRankCollectingUntilTheCollectorsBoundAndAsksForIt") {
  WatchdogConfig config;
  config.job_dir = "/d/job";
  config.collect_wait_s = 600;
  config.debugger = "cuda-gdb";
  DumpStart start{3, "node1", 4242, "written", std::chrono::steady_clock::now()};
  HangResponse r = planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt);
  CHECK(r.state_path == "/d/job/ranks/r00003.state.json");
  CHECK(r.state.phase == DumpPhase::kCollecting);
  CHECK(r.state.forensics == "pending");
  CHECK(r.state.snapshot == "written");
  CHECK(r.state.deadline_unix_s == r.state.time_unix_s + CollectorLauncher::kCollectorBoundS + 5);
  CHECK(r.collect);
  CHECK(r.collector.pid == 4242);
  CHECK(r.collector.rank == 3);
  CHECK(r.collector.log_path == "/d/job/ranks/r00003.collect.log");
  CHECK(r.collector.debugger == "cuda-gdb");
  CHECK(r.collector.mark_state);

  config.collect = false;
  start.rank.reset();
  HangResponse unranked = planResponse(config, dumpPaths(config.job_dir, std::nullopt, 4242), start, nullptr, std::nullopt);
  CHECK(unranked.state_path.empty());
  CHECK_FALSE(unranked.collect);
}

namespace {

// An executable /bin/sh script at `path` running `body`; returns the path.
std::string shellScript(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

// Rank 1's response in wait mode, its state "collecting" (with the collector, or not).
HangResponse rankOneDumping(const std::string& job, bool collect) {
  HangResponse r;
  r.on_hang = OnHang::kWait;
  r.collect = collect;
  r.state.rank = 1;
  r.state.phase = DumpPhase::kCollecting;
  r.state.forensics = collect ? "pending" : "off";
  r.state_path = rankStatePath(job, 1);
  return r;
}

}  // namespace

TEST_CASE("WithTheCollectorOffTheNodesLowestRankAsksNcclsRasBeforeItIsDone") {
  WatchdogConfig config;
  config.job_dir = "/d/job";
  config.collect = false;
  config.forensics_binary = "/opt/hangwatch/bin/forensics";
  DumpStart start{3, "node1", 4242, "written", std::chrono::steady_clock::now()};
  start.node_asks_ras = true;
  HangResponse r = planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt);
  CHECK_FALSE(r.collect);
  REQUIRE(r.ras);
  CHECK(r.ras->pid == 4242);
  CHECK(r.ras->rank == 3);
  CHECK(r.ras->job_dir == "/d/job");
  CHECK(r.ras->log_path == "/d/job/ranks/r00003.collect.log");
  CHECK(r.state.forensics == "off");
  // report --wait and abort mode wait for the answer, not longer.
  CHECK(r.state.deadline_unix_s == r.state.time_unix_s + r.ras->bound_s + 5 + 5);

  start.node_asks_ras = false;  // another rank of the node asks
  HangResponse other = planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt);
  CHECK_FALSE(other.ras);
  CHECK(other.state.deadline_unix_s == other.state.time_unix_s + 5);
  start.node_asks_ras = true;
  config.ask_ras = false;  // HANGWATCH_ASK_RAS=0
  CHECK_FALSE(planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt).ras);
  config.ask_ras = true;
  config.collect = true;  // the collector asks RAS itself
  HangResponse collecting = planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt);
  CHECK_FALSE(collecting.ras);
  CHECK(collecting.collector.ask_ras);
  config.ask_ras = false;
  CHECK_FALSE(planResponse(config, dumpPaths(config.job_dir, 3, 4242), start, nullptr, std::nullopt).collector.ask_ras);
}

TEST_CASE("TheRasQuestionRunsAsForensicsRasAndTheRankIsMarkedDoneAfterIt") {
  TempDir dir;
  const std::string job = dir.path + "/job";
  fs::create_directories(job + "/ranks");
  // Records its arguments, then takes a while, as RAS does for a member that does not answer.
  const std::string fake = shellScript(dir.path + "/forensics", "echo \"$@\" > " + dir.path + "/args\nsleep 0.3\n" +
                                                                     "date +%s.%N > " + dir.path + "/ended");
  HangResponse r = rankOneDumping(job, false);
  r.ras = RasRequest{fake, ::getpid(), 1, job, job + "/ranks/r00001.collect.log", 20, {}};
  HangResponder responder(nullptr, nullptr, TermHandling{});
  responder.respondHere(r);
  std::string args;
  std::getline(std::ifstream(dir.path + "/args"), args);
  CHECK(args == fmt::format("ras --pid {} --rank 1 --out {} --bound 20", ::getpid(), job));
  double ended = 0;
  std::ifstream(dir.path + "/ended") >> ended;
  Expected<RankState> s = readRankState(rankStatePath(job, 1));
  REQUIRE(s);
  CHECK(s->phase == DumpPhase::kDone);
  CHECK(s->forensics == "off");
  CHECK(ended > 0);
  CHECK(s->time_unix_s >= ended);
}

TEST_CASE("ALoweredCollectWaitShortensTheCollectorsDebuggerPhaseToFit") {
  CHECK(CollectorLauncher::debuggerBoundFor(120) == 60);  // the default: the collector's own bound
  CHECK(CollectorLauncher::debuggerBoundFor(75) == 60);
  CHECK(CollectorLauncher::debuggerBoundFor(60) == 45);
  CHECK(CollectorLauncher::debuggerBoundFor(25) == 10);
  CHECK(CollectorLauncher::debuggerBoundFor(3) == 5);
}

TEST_CASE("ARankContinuedAfterItsNodePeerFoundItStoppedKeepsWhatThePeerSawInItsOwnState") {
  TempDir dir;
  WatchdogConfig config;
  config.job_dir = dir.path + "/job";
  fs::create_directories(config.job_dir + "/ranks");
  RankState peer_said;
  peer_said.rank = 2;
  peer_said.phase = DumpPhase::kDone;
  peer_said.pid = 4242;
  peer_said.snapshot = "none: the process is stopped";
  peer_said.stopped_seen_by = 3;
  REQUIRE(writeFileAtomically(rankStatePath(config.job_dir, 2), toJson(peer_said).dump()).ok());
  DumpStart start{2, "node1", 4242, "written", std::chrono::steady_clock::now()};
  Expected<RankState> in_place = readRankState(rankStatePath(config.job_dir, 2));
  REQUIRE(in_place);
  const std::optional<RankState> before = *in_place;
  HangResponse r = planResponse(config, dumpPaths(config.job_dir, 2, 4242), start, nullptr, before);
  CHECK(r.state.phase == DumpPhase::kCollecting);
  CHECK(r.state.snapshot == "written");
  CHECK(r.state.stopped_seen_by == std::optional<int>(3));
  CHECK(r.state.note.find("stopped when rank 3") != std::string::npos);

  // Another process of the same rank (a restart in the same folder) is not the one seen stopped.
  HangResponse other = planResponse(config, dumpPaths(config.job_dir, 2, 5151),
                                    DumpStart{2, "node1", 5151, "written", std::chrono::steady_clock::now()}, nullptr, before);
  CHECK_FALSE(other.state.stopped_seen_by);
  CHECK(other.state.note.empty());
}

TEST_CASE("AbortModeExitsOnlyOnceTheWholeJobIsDoneAndMarksThisRankDoneFirst") {
  TempDir dir;
  std::string job = dir.path + "/job";
  std::atomic<int> polls{0};
  int exit_code = -1;
  bool aborted = false;
  bool released = false;
  HangResponse r;
  r.on_hang = OnHang::kAbort;
  r.state.rank = 3;
  r.state_path = rankStatePath(job, 3);
  r.abort_grace_s = 60;
  r.job_complete = [&] {
    // This rank is already marked done while it waits for the others.
    auto s = readRankState(rankStatePath(job, 3));
    CHECK((s.ok() && s->done()));
    return ++polls >= 3;
  };
  HangResponder responder([&] { aborted = true; }, [&](int code) { exit_code = code; },
                          TermHandling{[] { return false; }, [] { return 0.0; }, [&] { released = true; }});
  responder.respondHere(r);
  CHECK(polls.load() == 3);
  CHECK(aborted);
  CHECK(released);
  CHECK(exit_code == HangResponder::kAbortExitCode);
  auto s = readRankState(rankStatePath(job, 3));
  REQUIRE(s.ok());
  CHECK(s->done());
  CHECK(s->forensics == "off");
}

TEST_CASE("AbortModeGivesUpWaitingForTheJobAfterTheGrace") {
  int exit_code = -1;
  HangResponse r;
  r.on_hang = OnHang::kAbort;
  r.abort_grace_s = 0.3;
  r.job_complete = [] { return false; };
  HangResponder responder(nullptr, [&](int code) { exit_code = code; },
                          TermHandling{[] { return false; }, [] { return 0.0; }, [] {}});
  responder.respondHere(r);
  CHECK(exit_code == HangResponder::kAbortExitCode);
}

TEST_CASE("AHeldBackSigtermCutsTheJobWaitShortAndIsPassedOn") {
  int exit_code = -1;
  int released = 0;
  HangResponse r;
  r.on_hang = OnHang::kAbort;
  r.abort_grace_s = 3600;
  r.job_complete = [] { return false; };
  HangResponder responder(nullptr, [&](int code) { exit_code = code; },
                          TermHandling{[] { return true; }, [] { return 1.0; }, [&] { ++released; }});
  responder.respondHere(r);
  CHECK(released == 1);
  CHECK(exit_code == HangResponder::kAbortExitCode);
}

TEST_CASE("ASigtermHeldToItsBoundWhileTheCollectorRunsIsWrittenIntoTheRanksState") {
  // A collector too slow for the launcher (a debugger attaching to a large process): the
  // SIGTERM goes on, and the state says why the dump may be cut short, with the collector's pid.
  TempDir dir;
  const std::string job = dir.path + "/job";
  fs::create_directories(job + "/ranks");
  const std::string slow = shellScript(dir.path + "/slow-collector", "exec sleep 30");
  HangResponse r = rankOneDumping(job, true);
  r.collector.binary = slow;
  r.collector.pid = ::getpid();
  r.collector.job_dir = job;
  r.collector.log_path = job + "/collect.log";
  r.collector.wait_s = 60;
  int released = 0;
  HangResponder responder(nullptr, nullptr,
                          TermHandling{[] { return true; }, [] { return HangResponder::kTermHoldS + 1; },
                                       [&] { ++released; }});
  responder.respondHere(r);
  CHECK(released == 1);
  Expected<RankState> s = readRankState(rankStatePath(job, 1));
  REQUIRE(s);
  CHECK(s->phase == DumpPhase::kCollecting);
  CHECK(s->forensics == "pending");
  CHECK(s->note.find("the launcher's SIGTERM ended the process") != std::string::npos);
  REQUIRE(s->collector_pid > 0);
  CHECK(::kill(static_cast<pid_t>(s->collector_pid), 0) == 0);  // still running: the launcher's SIGKILL ends it
  ::kill(static_cast<pid_t>(s->collector_pid), SIGKILL);
  int status = 0;
  CHECK(::waitpid(static_cast<pid_t>(s->collector_pid), &status, 0) == s->collector_pid);
}

namespace {
std::atomic<int> job_handler_calls{0};
void jobTermHandler(int) { job_handler_calls.fetch_add(1); }
}  // namespace

TEST_CASE("SigtermWhileDumpingIsHeldThenDeliveredToTheJobsOwnHandler") {
  struct sigaction job {};
  job.sa_handler = &jobTermHandler;
  sigemptyset(&job.sa_mask);
  REQUIRE(sigaction(SIGTERM, &job, nullptr) == 0);
  TermDeferral::arm();
  CHECK_FALSE(TermDeferral::releaseEndsProcess());  // nothing held
  ::raise(SIGTERM);
  CHECK(TermDeferral::pending());
  CHECK(job_handler_calls.load() == 0);
  CHECK_FALSE(TermDeferral::releaseEndsProcess());  // the job's own handler takes it
  TermDeferral::release();
  CHECK(job_handler_calls.load() == 1);
  CHECK_FALSE(TermDeferral::pending());
  struct sigaction now {};
  REQUIRE(sigaction(SIGTERM, nullptr, &now) == 0);
  CHECK(now.sa_handler == &jobTermHandler);
}

TEST_CASE("AHeldSigtermGoesOnAfterTheBoundEvenWhenNothingReleasesIt") {
  // A poller or responder stuck on a stalled dump folder never answers: the guard does.
  struct sigaction job {};
  job.sa_handler = &jobTermHandler;
  sigemptyset(&job.sa_mask);
  REQUIRE(sigaction(SIGTERM, &job, nullptr) == 0);
  TermDeferral::arm(0.3);
  ::raise(SIGTERM);
  CHECK(TermDeferral::pending());
  CHECK(job_handler_calls.load() == 0);
  for (int i = 0; i < 300 && job_handler_calls.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(job_handler_calls.load() == 1);
  CHECK(TermDeferral::pendingForSeconds() == 0);
}

TEST_CASE("AHandlerTheJobInstallsWhileDumpingIsKeptOnRelease") {
  TermDeferral::arm();
  struct sigaction job {};
  job.sa_handler = &jobTermHandler;
  sigemptyset(&job.sa_mask);
  REQUIRE(sigaction(SIGTERM, &job, nullptr) == 0);  // e.g. Python's signal.signal meanwhile
  TermDeferral::release();
  struct sigaction now {};
  REQUIRE(sigaction(SIGTERM, nullptr, &now) == 0);
  CHECK(now.sa_handler == &jobTermHandler);
}

namespace trigger_share_test {

// What TermDeferral's handler does in a process that did not arm it: the default action back,
// and the signal raised again.
void probeHandler(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

// Whether a forked child of this (multithreaded) process ends by a signal whose handler sets
// the default action back and raises it again: ThreadSanitizer's runtime does not deliver it
// in every version (the child runs on), which no product code can change.
bool forkedChildRunsSignalHandlers() {
  // Multithreaded when it forks, with a thread blocked in a system call, as an armed process
  // is (TermDeferral's guard thread in read()).
  int wake[2];
  REQUIRE(::pipe(wake) == 0);
  std::thread other([fd = wake[0]] {
    char c;
    (void)!::read(fd, &c, 1);
  });
  struct sigaction probe {}, before {};
  probe.sa_handler = &probeHandler;
  sigemptyset(&probe.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &probe, &before) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::raise(SIGUSR2);
    ::_exit(0);
  }
  (void)!::write(wake[1], "x", 1);
  other.join();
  ::close(wake[0]);
  ::close(wake[1]);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(sigaction(SIGUSR2, &before, nullptr) == 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGUSR2;
}

}  // namespace trigger_share_test

TEST_CASE("AForkedChildOfAnArmedProcessGetsSigtermAsTheJobMeantIt") {
  // A dataloader worker inherits the holding handler but has no poller to answer it.
  if (!trigger_share_test::forkedChildRunsSignalHandlers()) {
    WARN("skipped: a forked child of this process is not ended by a signal it raises again from its handler "
         "(ThreadSanitizer's runtime)");
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  REQUIRE(sigaction(SIGTERM, &dfl, nullptr) == 0);
  TermDeferral::arm();
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::raise(SIGTERM);
    ::_exit(0);  // reached only when the signal was swallowed
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  // The parent still holds one, and passing it on would end it: the default action.
  ::raise(SIGTERM);
  CHECK(TermDeferral::pending());
  CHECK(TermDeferral::releaseEndsProcess());
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  REQUIRE(sigaction(SIGTERM, &ignore, nullptr) == 0);  // so the resent one does not end the test
  TermDeferral::release();
  CHECK_FALSE(TermDeferral::pending());
}

TEST_CASE("AMemberWhoseProcessEndedIsNamedByItsRankAndHowItEnded") {
  TempDir dir;
  std::string job = dir.path + "/job";
  auto me = NodeShare::attach(job, dir.path, "", 0);
  REQUIRE(me.ok());
  enum class Ends { kKilled, kLeaves, kOnTerm };
  auto member = [&](int rank, Ends how) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      auto b = NodeShare::attach(job, dir.path, "", rank);
      if (!b.ok()) ::_exit(1);
      if (how == Ends::kLeaves) (*b)->leave();
      if (how == Ends::kOnTerm) (*b)->leaveOnTerm();
      ::raise(how == Ends::kOnTerm ? SIGTERM : SIGKILL);  // no exit handler runs
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    return child;
  };
  CHECK((*me)->goneMembers().empty());
  pid_t killed = member(5, Ends::kKilled);
  pid_t left = member(6, Ends::kLeaves);
  pid_t termed = member(7, Ends::kOnTerm);
  auto gone = (*me)->goneMembers();
  std::sort(gone.begin(), gone.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  REQUIRE(gone.size() == 3);
  CHECK(gone[0].rank == 5);
  CHECK(gone[0].pid == killed);
  CHECK_FALSE(gone[0].left);
  CHECK_FALSE(gone[0].on_term);
  // A rank that ended normally while the others still need it is named too, as one that left.
  CHECK(gone[1].rank == 6);
  CHECK(gone[1].pid == left);
  CHECK(gone[1].left);
  CHECK_FALSE(gone[1].on_term);
  // One that passed on the launcher's SIGTERM with nothing pending, as such.
  CHECK(gone[2].rank == 7);
  CHECK(gone[2].pid == termed);
  CHECK(gone[2].on_term);
  CHECK_FALSE(gone[2].left);
  // A member without a known rank cannot be named.
  pid_t anonymous = ::fork();
  REQUIRE(anonymous >= 0);
  if (anonymous == 0) {
    auto b = NodeShare::attach(job, dir.path);
    ::raise(SIGKILL);
    ::_exit(0);
  }
  REQUIRE(::waitpid(anonymous, nullptr, 0) == anonymous);
  CHECK((*me)->goneMembers().size() == 3);
  // The node's ranks for its summary: every member that joined with a rank, live or gone.
  CHECK((*me)->memberRanks() == std::vector<int>{0, 5, 6, 7});
  // Another job of this user starting on the node sweeps boards whose members all exited: this
  // one has a live member, and keeps its dead ones.
  auto other = NodeShare::attach(dir.path + "/other-job", dir.path, "", 0);
  REQUIRE(other.ok());
  CHECK((*me)->goneMembers().size() == 3);
}

TEST_CASE("AMemberStoppedBySigstopIsNamedWithItsDeviceAndOneTracedIsNot") {
  TempDir dir;
  std::string job = dir.path + "/job";
  auto me = NodeShare::attach(job, dir.path, "", 0);
  REQUIRE(me.ok());
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    // Without a launcher rank: the rank and device are learned after joining.
    auto b = NodeShare::attach(job, dir.path);
    if (!b.ok()) ::_exit(1);
    (*b)->noteIdentity(7, 3);
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  CHECK((*me)->stoppedMembers().empty());
  REQUIRE(::kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, WUNTRACED) == child);
  REQUIRE(WIFSTOPPED(status));
  auto stopped = (*me)->stoppedMembers();
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].rank == 7);
  CHECK(stopped[0].pid == child);
  CHECK(stopped[0].device == 3);
  CHECK((*me)->goneMembers().empty());  // frozen, not gone
  // Continued, it is no longer stopped; under a tracer's stop ('t') it is not named either.
  REQUIRE(::kill(child, SIGCONT) == 0);
  REQUIRE(::waitpid(child, &status, WCONTINUED) == child);
  CHECK((*me)->stoppedMembers().empty());
  REQUIRE(::ptrace(PTRACE_SEIZE, child, nullptr, nullptr) == 0);
  REQUIRE(::ptrace(PTRACE_INTERRUPT, child, nullptr, nullptr) == 0);
  REQUIRE(::waitpid(child, &status, __WALL) == child);
  CHECK((*me)->stoppedMembers().empty());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, __WALL);
  auto gone = (*me)->goneMembers();
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].device == 3);
}

TEST_CASE("BoardsOfTwoHostsAreApartEvenWhenTheyShareOneSharedMemory") {
  // Two hosts that see one /dev/shm (containers on one machine, or test nodes made of UTS
  // namespaces) must not share a board: a rank would take the other host's ranks for its own.
  TempDir dir;
  const std::string job = dir.path + "/job";
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    const char name[] = "another-host";
    if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(name, sizeof name - 1) != 0) ::_exit(3);
    const std::string path = nodeSharePath(job, dir.path);
    if (::write(fds[1], path.data(), path.size()) != static_cast<ssize_t>(path.size())) ::_exit(1);
    ::_exit(0);
  }
  ::close(fds[1]);
  char buf[512] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WEXITSTATUS(status) == 3) {
    WARN("no UTS namespace here (needs root): skipped");
    return;
  }
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)) != nodeSharePath(job, dir.path));
}
