// simnccl's RAS client service (ras_server.h): NCCL's line protocol, the STATUS answer in
// NCCL's JSON layout, every process's communicators merged into it (not only the asker's),
// members that cannot answer in "missing_ranks" (a killed one at once, a stopped one after
// the client's timeout), and the 60 s rule for considered_dead.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nccl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/ras_server.h"
#include "hangwatch/simgpu/nccl/unique_id.h"
#include "multi_rank.h"

namespace ras_test {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 3;
constexpr int kPidSlot = 40;   // board.progress[kPidSlot + r]: rank r's pid
constexpr int kPortSlot = 50;  // board.progress[kPortSlot + r]: rank r's RAS port

// A port nothing listens on now: the kernel's pick for port 0.
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

char processState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text) || text.rfind(')') == std::string::npos) return '\0';
  return text[text.rfind(')') + 2];
}

bool awaitState(pid_t pid, const std::string& states) {
  const auto end = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < end) {
    if (states.find(processState(pid)) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// One client connection; every read gives up after 60 s so a broken server fails the test.
class RasConnection {
 public:
  explicit RasConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    timeval tv{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RasConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::string& line) {
    REQUIRE(::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(line.size()));
  }
  std::string line() {
    std::string out;
    char c = 0;
    while (::recv(fd_, &c, 1, 0) == 1 && c != '\n') out += c;
    return out;
  }
  std::string rest() {  // up to end of file (the server closes after STATUS)
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  std::string ask(const std::string& line) {
    send(line);
    return this->line();
  }

 private:
  int fd_;
  bool connected_ = false;
};

// kRanks ranks in forked processes, each with its own RAS port (a stopped process would hold
// connections to a port it shares); they stay in the communicator until the test ends. With
// `split`, ranks 1 and 2 also split a communicator of their own off the first, as a pipeline
// job's stage groups are, which rank 0 is not a member of.
class RasJob {
 public:
  explicit RasJob(std::map<std::string, std::string> env = {}, bool split = false) : job_(kRanks) {
    for (int r = 0; r < kRanks; ++r) job_.board().progress[kPortSlot + r].store(freePort());
    const ncclUniqueId id = job_.id();
    testing::RankBoard& board = job_.board();
    job_.start(
        [id, &board, split](int rank) {
          const std::string addr = "127.0.0.1:" + std::to_string(board.progress[kPortSlot + rank].load());
          setenv("NCCL_RAS_ADDR", addr.c_str(), 1);
          ncclComm_t comm = nullptr;
          ncclComm_t stage = nullptr;
          if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return 100;
          if (split && ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, rank, &stage, nullptr) != ncclSuccess)
            return 102;
          board.progress[kPidSlot + rank].store(static_cast<int>(getpid()));
          board.progress[rank].store(1);
          while (board.abort_requested.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          if (stage != nullptr && ncclCommDestroy(stage) != ncclSuccess) return 103;
          return ncclCommDestroy(comm) == ncclSuccess ? 0 : 101;
        },
        env);
    const auto end = Clock::now() + std::chrono::seconds(60);
    while (job_.snapshot() != std::vector<int>(kRanks, 1) && Clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(job_.snapshot() == std::vector<int>(kRanks, 1));
  }
  ~RasJob() { job_.board().abort_requested.store(1); }

  int port(int rank) { return job_.board().progress[kPortSlot + rank].load(); }
  pid_t pid(int rank) { return job_.board().progress[kPidSlot + rank].load(); }
  uint64_t hash() { return simnccl::communicatorId(simnccl::segmentNameFromId(job_.id())->c_str()); }
  testing::RankResults finish() {
    job_.board().abort_requested.store(1);
    return job_.wait(std::chrono::seconds(60));
  }

 private:
  testing::MultiRankJob job_;
};

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A client that asked for JSON and a STATUS timeout of `timeout_s`.
std::unique_ptr<RasConnection> jsonClient(int port, int timeout_s) {
  auto c = std::make_unique<RasConnection>(port);
  REQUIRE(c->connected());
  REQUIRE(c->ask("CLIENT PROTOCOL 2\n") == "SERVER PROTOCOL 2");
  REQUIRE(c->ask("TIMEOUT " + std::to_string(timeout_s) + "\n") == "OK");
  REQUIRE(c->ask("SET FORMAT json\n") == "OK");
  return c;
}

// What follows STATUS up to the end of file (SIMNCCL_RAS_TEST_PRINT: also on stdout).
std::string statusRest(RasConnection& c) {
  std::string text = c.rest();
  if (std::getenv("SIMNCCL_RAS_TEST_PRINT") != nullptr) std::fputs(text.c_str(), stdout);
  return text;
}

TEST_CASE("RasAnswersNcclsProtocolLines") {
  RasJob job;
  RasConnection c(job.port(0));
  REQUIRE(c.connected());
  CHECK(c.ask("CLIENT PROTOCOL 7\n") == "SERVER PROTOCOL 2");
  CHECK(c.ask("timeout 3\r\n") == "OK");
  CHECK(c.ask("TIMEOUT soon\n") == "ERROR: Invalid timeout value soon");
  CHECK(c.ask("SET FORMAT JSON\n") == "OK");
  CHECK(c.ask("set format text\n") == "OK");
  CHECK(c.ask("SET FORMAT xml\n") == "ERROR: Invalid format xml");
  CHECK(c.ask("DANCE now\n") == "ERROR: Unknown command DANCE now");
  c.send("STATUS\n");
  CHECK(c.rest() == "ERROR: simnccl's RAS renders STATUS in JSON only (SET FORMAT json)\n");
  CHECK(testing::allZero(job.finish()));
}

TEST_CASE("RasStatusListsEveryLiveMemberAtOnce") {
  RasJob job;
  auto c = jsonClient(job.port(1), 30);
  const auto start = Clock::now();
  c->send("STATUS\n");
  const nlohmann::json doc = nlohmann::json::parse(statusRest(*c));
  CHECK(secondsSince(start) < 30);
  CHECK(doc["nccl_version"].get<std::string>().rfind("2.", 0) == 0);
  REQUIRE(doc["communicators_count"] == 1);
  const nlohmann::json& comm = doc["communicators"][0];
  CHECK(comm["hash"] == fmt::format("0x{:x}", job.hash()));
  CHECK(comm["size"] == kRanks);
  CHECK(comm["ranks_count"] == kRanks);
  CHECK(comm["missing_ranks_count"] == 0);
  CHECK(comm["missing_ranks"].empty());
  REQUIRE(comm["ranks"].size() == kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const nlohmann::json& rank = comm["ranks"][r];
    CHECK(rank["rank"] == r);
    CHECK(rank["pid"] == job.pid(r));
    CHECK(rank["cuda_dev"].is_number());
    CHECK(rank["status"]["async_error"] == 0);
    CHECK(rank["status"]["abort_flag"] == false);
  }
  CHECK(doc["ras"]["timeouts_count"] == 0);
  CHECK(testing::allZero(job.finish()));
}

// NCCL's RAS does not wait for a process whose connection closed: its leg is purged at once
// (rasnet.cc rasSocketTerminate -> rasCollsPurgeConn), and a link that is not ready gets no
// request at all (collectives.cc).
TEST_CASE("RasReportsAKilledMemberMissingAtOnce") {
  RasJob job;
  REQUIRE(::kill(job.pid(2), SIGKILL) == 0);
  REQUIRE(awaitState(job.pid(2), std::string("ZX") + '\0'));
  auto c = jsonClient(job.port(0), 30);
  const auto start = Clock::now();
  c->send("STATUS\n");
  const nlohmann::json doc = nlohmann::json::parse(statusRest(*c));
  CHECK(secondsSince(start) < 10);
  const nlohmann::json& comm = doc["communicators"][0];
  CHECK(comm["ranks_count"] == kRanks - 1);
  CHECK(comm["missing_ranks_count"] == 1);
  REQUIRE(comm["missing_ranks"].size() == 1);
  const nlohmann::json& missing = comm["missing_ranks"][0];
  CHECK(missing["rank"] == 2);
  CHECK(missing["pid"] == job.pid(2));
  CHECK(missing["status"]["unresponsive"] == true);
  CHECK(missing["status"]["considered_dead"] == false);
  CHECK(doc["ras"]["timeouts_count"] == 0);
  const auto res = job.finish();
  CHECK(res.exit_codes == std::vector<int>{0, 0, 128 + SIGKILL});
}

// A process that is there but does not answer (stopped: its RAS thread too) is waited for up
// to the client's timeout, and counted in timeouts_count; other clients are answered meanwhile.
TEST_CASE("RasReportsAStoppedMemberUnresponsiveAfterTheClientTimeout") {
  RasJob job;
  REQUIRE(::kill(job.pid(1), SIGSTOP) == 0);
  REQUIRE(awaitState(job.pid(1), "Tt"));
  auto c = jsonClient(job.port(0), 1);
  const auto start = Clock::now();
  c->send("STATUS\n");
  RasConnection other(job.port(0));
  CHECK(other.ask("CLIENT PROTOCOL 2\n") == "SERVER PROTOCOL 2");
  const double other_s = secondsSince(start);
  const nlohmann::json doc = nlohmann::json::parse(statusRest(*c));
  const double status_s = secondsSince(start);
  ::kill(job.pid(1), SIGCONT);
  CHECK(status_s >= 1.0);
  CHECK(other_s < status_s);
  const nlohmann::json& comm = doc["communicators"][0];
  REQUIRE(comm["missing_ranks"].size() == 1);
  CHECK(comm["missing_ranks"][0]["rank"] == 1);
  CHECK(comm["missing_ranks"][0]["status"]["unresponsive"] == true);
  CHECK(comm["ranks"].size() == kRanks - 1);
  CHECK(doc["ras"]["timeouts_count"] == 1);
  CHECK(doc["ras"]["collection_time_sec"].get<double>() >= 1.0);
  CHECK(testing::allZero(job.finish()));
}

// Silent for RAS_KEEPALIVE_TIMEOUT_WARN (5 s) before the question, its link is "experiencing
// delays" and the collective is not sent there: not waited for, not a timeout.
TEST_CASE("RasDoesNotWaitForAMemberSilentSinceBeforeTheQuestion") {
  RasJob job;
  REQUIRE(::kill(job.pid(1), SIGSTOP) == 0);
  REQUIRE(awaitState(job.pid(1), "Tt"));
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));
  auto c = jsonClient(job.port(0), 30);
  const auto start = Clock::now();
  c->send("STATUS\n");
  const nlohmann::json doc = nlohmann::json::parse(statusRest(*c));
  const double status_s = secondsSince(start);
  ::kill(job.pid(1), SIGCONT);
  CHECK(status_s < 10);
  REQUIRE(doc["communicators"][0]["missing_ranks"].size() == 1);
  CHECK(doc["communicators"][0]["missing_ranks"][0]["status"]["unresponsive"] == true);
  CHECK(doc["ras"]["timeouts_count"] == 0);
  CHECK(testing::allZero(job.finish()));
}

// NCCL floods STATUS to every RAS peer and merges what each reports (collectives.cc
// rasMsgHandleCollReq, rasCollCommsMerge): a communicator the asked process is not in is
// listed, its members as their own processes report them, a killed one missing.
TEST_CASE("RasListsCommunicatorsTheAskedProcessIsNotIn") {
  RasJob job({}, true);
  REQUIRE(::kill(job.pid(2), SIGKILL) == 0);
  REQUIRE(awaitState(job.pid(2), std::string("ZX") + '\0'));
  auto c = jsonClient(job.port(0), 30);
  c->send("STATUS\n");
  const nlohmann::json doc = nlohmann::json::parse(statusRest(*c));
  REQUIRE(doc["communicators_count"] == 2);
  const nlohmann::json* stage = nullptr;
  for (const nlohmann::json& comm : doc["communicators"])
    if (comm["size"] == 2) stage = &comm;
  REQUIRE(stage != nullptr);
  CHECK((*stage)["hash"] != fmt::format("0x{:x}", job.hash()));
  REQUIRE((*stage)["ranks"].size() == 1);
  CHECK((*stage)["ranks"][0]["rank"] == 0);
  CHECK((*stage)["ranks"][0]["pid"] == job.pid(1));
  REQUIRE((*stage)["missing_ranks"].size() == 1);
  CHECK((*stage)["missing_ranks"][0]["rank"] == 1);
  CHECK((*stage)["missing_ranks"][0]["pid"] == job.pid(2));
  CHECK((*stage)["missing_ranks"][0]["status"]["unresponsive"] == true);
  const auto res = job.finish();
  CHECK(res.exit_codes == std::vector<int>{0, 0, 128 + SIGKILL});
}

TEST_CASE("RasConsidersAPeerDeadAfterSixtySecondsOfUnansweredLooks") {
  using simnccl::RasPeerLiveness;
  RasPeerLiveness liveness(std::chrono::seconds(60));
  const RasPeerLiveness::Peer peer{"node0", 4242};
  const auto t0 = RasPeerLiveness::Clock::time_point{} + std::chrono::hours(1);
  for (int s = 0; s < 60; ++s) liveness.look(peer, false, t0 + std::chrono::seconds(s));
  CHECK_FALSE(liveness.consideredDead(peer));
  liveness.look(peer, true, t0 + std::chrono::seconds(60));  // it answered: the count starts over
  for (int s = 61; s <= 120; ++s) liveness.look(peer, false, t0 + std::chrono::seconds(s));
  CHECK_FALSE(liveness.consideredDead(peer));
  liveness.look(peer, false, t0 + std::chrono::seconds(121));
  CHECK(liveness.consideredDead(peer));
  CHECK_FALSE(liveness.consideredDead({"node0", 4243}));
}

TEST_CASE("RasTimeoutsScaleWithNcclRasTimeoutFactor") {
  setenv("NCCL_RAS_TIMEOUT_FACTOR", "3", 1);
  CHECK(simnccl::rasTimeoutFactor() == 3);
  unsetenv("NCCL_RAS_TIMEOUT_FACTOR");
  CHECK(simnccl::rasTimeoutFactor() == 1);
}

TEST_CASE("RasDisabledByNcclRasEnableListensNowhere") {
  RasJob job(std::map<std::string, std::string>{{"NCCL_RAS_ENABLE", "0"}});
  for (int r = 0; r < kRanks; ++r) CHECK_FALSE(RasConnection(job.port(r)).connected());
  CHECK(testing::allZero(job.finish()));
}

TEST_CASE("RasStatusJsonIsLaidOutAsNcclWritesIt") {
  simnccl::RasStatus st;
  st.cuda_runtime_version = 12080;
  st.cuda_driver_version = 12080;
  st.timestamp = "2026-01-02 03:04:05";
  simnccl::RasMember live{0, "n0", 11, 0, 0, false};
  simnccl::RasMember gone{1, "n0", 12, 1, 0, false};
  gone.reported = false;
  gone.unresponsive = true;
  gone.considered_dead = true;
  st.comms.push_back({0xabc, 0x1, 0x2, 2, {live, gone}});
  st.collection_time_sec = 1.0;
  st.timeouts_count = 1;
  const std::string want = std::string("{\n  \"nccl_version\": \"") + std::to_string(NCCL_MAJOR) + "." +
                           std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH) + NCCL_SUFFIX + R"(",
  "cuda_runtime_version": 12080,
  "cuda_driver_version": 12080,
  "timestamp": "2026-01-02 03:04:05",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0xabc",
      "secondary_hash": "0x1:0x2",
      "size": 2,
      "ranks_count": 1,
      "missing_ranks_count": 1,
      "ranks": [
        {
          "rank": 0,
          "host": "n0",
          "pid": 11,
          "cuda_dev": 0,
          "nvml_dev": 0,
          "status": {
            "init_state": 0,
            "async_error": 0,
            "finalize_called": false,
            "destroy_flag": false,
            "abort_flag": false
          }
        }
      ],
      "missing_ranks": [
        {
          "rank": 1,
          "host": "n0",
          "pid": 12,
          "cuda_dev": 1,
          "nvml_dev": 1,
          "status": {
            "unresponsive": true,
            "considered_dead": true
          }
        }
      ]
    }
  ],
  "ras": {
    "collection_time_sec": 1.000,
    "timeouts_count": 1
  }
}
)";
  CHECK(simnccl::rasStatusJson(st) == want);
  st.comms.clear();
  CHECK(nlohmann::json::parse(simnccl::rasStatusJson(st))["communicators"].empty());
}

}  // namespace ras_test
