// The RAS client against NCCL's client protocol as NCCL 2.28 writes it
// (src/ras/client_support.cc): the reply lines, the JSON layout, and servers that fail.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/forensics/ras_client.h"

using namespace hangwatch;
using namespace hangwatch::forensics;

namespace {

// One communicator of 3 ranks, rank 2 missing, laid out as NCCL's json writers do.
const char* const kNcclJson = R"({
  "nccl_version": "2.28.9",
  "cuda_runtime_version": 13000,
  "cuda_driver_version": 13000,
  "timestamp": "2026-11-29 22:40:00",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0x9a3f00c2e1d47b05",
      "secondary_hash": "0x1:0x2",
      "size": 3,
      "ranks_count": 2,
      "missing_ranks_count": 1,
      "ranks": [
        {
          "rank": 0, "host": "10.0.0.1", "pid": 101, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false,
                     "abort_flag": false},
          "collective_counts": {"Broadcast": 0, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0, "AllReduce": 12}
        },
        {
          "rank": 1, "host": "10.0.0.1", "pid": 102, "cuda_dev": 1, "nvml_dev": 1,
          "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false,
                     "abort_flag": false},
          "collective_counts": {"AllReduce": 12}
        }
      ],
      "missing_ranks": [
        {
          "rank": 2, "host": "10.0.0.2", "pid": 203, "cuda_dev": 0, "nvml_dev": 0,
          "status": {"unresponsive": true, "considered_dead": false}
        }
      ]
    }
  ],
  "ras": {"collection_time_sec": 5.002, "timeouts_count": 1}
}
)";

// A server on a port of its own that answers one connection with `reply` after the protocol
// line (or says nothing at all when `silent`), then closes; with several replies, one
// connection after another, each with the next.
struct OneShotServer {
  ScopedFd listener;
  std::string address;
  std::thread thread;

  explicit OneShotServer(std::string reply, bool silent = false)
      : OneShotServer(std::vector<std::string>{std::move(reply)}, silent) {}
  explicit OneShotServer(std::vector<std::string> replies, bool silent = false) {
    listener = ScopedFd(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener.get(), 4) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len);
    address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    thread = std::thread([this, replies, silent] {
      for (const std::string& reply : replies) serve(reply, silent);
    });
  }
  void serve(const std::string& reply, bool silent) {
    {
      ScopedFd c(::accept(listener.get(), nullptr, nullptr));
      if (!c.valid()) return;
      std::string got;
      auto readUntil = [&](const char* text) {
        char buf[256];
        while (got.find(text) == std::string::npos) {
          const ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
          if (n <= 0) return false;
          got.append(buf, static_cast<size_t>(n));
        }
        return true;
      };
      if (!readUntil("\n")) return;
      if (silent) {
        readUntil("never said");  // until the client gives up and closes
        return;
      }
      const std::string hello = "SERVER PROTOCOL 2\n";
      ::send(c.get(), hello.data(), hello.size(), MSG_NOSIGNAL);
      if (readUntil("STATUS\n")) ::send(c.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    }
  }
  ~OneShotServer() {
    ::shutdown(listener.get(), SHUT_RDWR);
    thread.join();
  }
};

// A loopback port bound by `holder` and not listening: connecting to it is refused.
std::string unlistenedAddress(ScopedFd& holder) {
  holder = ScopedFd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(holder.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

}  // namespace

TEST_CASE("RasReplyAsNcclWritesItGivesEveryMemberAndTheMissingOne") {
  auto comms = parseRasReply(std::string("SERVER PROTOCOL 2\nOK\n") + kNcclJson);
  REQUIRE(comms.ok());
  REQUIRE(comms->size() == 1);
  const RasComm& c = comms->front();
  CHECK(c.hash == "0x9a3f00c2e1d47b05");
  CHECK(c.size == 3);
  REQUIRE(c.ranks.size() == 2);
  CHECK(c.ranks[1].pid == 102);
  CHECK_FALSE(c.ranks[1].unresponsive);
  REQUIRE(c.missing.size() == 1);
  CHECK(c.missing[0].rank == 2);
  CHECK(c.missing[0].host == "10.0.0.2");
  CHECK(c.missing[0].unresponsive);
  CHECK_FALSE(c.missing[0].considered_dead);
}

TEST_CASE("RasReplyOfAnOlderNcclOrGarbageIsAnErrorThatSaysWhat") {
  auto old = parseRasReply("SERVER PROTOCOL 2\nERROR: Unknown command SET FORMAT json\nNCCL version 2.24.3\n");
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().find("Unknown command SET FORMAT json") != std::string::npos);
  CHECK_FALSE(parseRasReply("").ok());
  CHECK_FALSE(parseRasReply("SERVER PROTOCOL 2\nOK\n{\"communicators\": [{\"size\": 3}]}").ok());  // no hash
  CHECK_FALSE(parseRasReply("SERVER PROTOCOL 2\nOK\n{\"communicators\": [").ok());
}

TEST_CASE("RasAddressIsTheProcesssOwnOrNcclsDefaultAndNoneWhenItsRasIsOff") {
  CHECK(*rasAddressOf({{"PATH", "/bin"}}) == "localhost:28028");
  CHECK(*rasAddressOf({{"NCCL_RAS_ADDR", "127.0.0.1:31000"}}) == "127.0.0.1:31000");
  auto off = rasAddressOf({{"NCCL_RAS_ENABLE", "0"}});
  REQUIRE_FALSE(off.ok());
  CHECK(off.error().find("NCCL_RAS_ENABLE=0") != std::string::npos);
  CHECK_FALSE(rasAddressOf({}).ok());
}

TEST_CASE("AskingRasSpeaksTheProtocolAndReadsTheAnswer") {
  OneShotServer server(std::string("OK\n") + kNcclJson);
  RasStatus s = askRas(server.address, 10);
  INFO(s.error);
  CHECK(s.error.empty());
  CHECK(s.address == server.address);
  REQUIRE(s.communicators.size() == 1);
  CHECK(s.communicators[0].missing.size() == 1);
  CHECK(s.time_unix_s > 0);
}

TEST_CASE("RasAnswerCutShortByItsProcessEndingIsAskedAgainOnANewConnection") {
  // The first process the kernel hands the connection to ends after the protocol lines (its
  // launcher's SIGTERM); the next one answers.
  OneShotServer server(std::vector<std::string>{"OK\n", std::string("OK\n") + kNcclJson});
  RasStatus s = askRas(server.address, 10);
  INFO(s.error);
  CHECK(s.error.empty());
  REQUIRE(s.communicators.size() == 1);
  // An ERROR line is RAS's answer: not asked again.
  OneShotServer old(std::vector<std::string>{"ERROR: Unknown command SET FORMAT json\n"});
  CHECK(askRas(old.address, 10).error.find("Unknown command") != std::string::npos);
}

TEST_CASE("RasThatDoesNotAnswerOrIsNotThereIsAnErrorWithinTheBound") {
  {
    OneShotServer stopped("", /*silent=*/true);  // as a process a debugger holds stopped
    RasStatus s = askRas(stopped.address, 3);
    CHECK(s.communicators.empty());
    CHECK(s.error.find("no NCCL RAS answered") != std::string::npos);
    CHECK(s.seconds < 5);
  }
  ScopedFd probe;
  RasStatus none = askRas(unlistenedAddress(probe), 3);
  CHECK(none.error.find("cannot connect") != std::string::npos);
  CHECK_FALSE(askRas("no-port-here", 1).error.empty());
}

TEST_CASE("RasQuestionReturnsOnceTheQuestionIsInAndGivesTheAnswerLater") {
  OneShotServer server(std::string("OK\n") + kNcclJson);
  std::unique_ptr<RasQuestion> q = RasQuestion::ask(server.address, 10);
  RasStatus s = q->wait();
  INFO(s.error);
  CHECK(s.error.empty());
  REQUIRE(s.communicators.size() == 1);
  // Asking a RAS that is not there fails at once and says so in the answer.
  ScopedFd probe;
  CHECK(RasQuestion::ask(unlistenedAddress(probe), 3)->wait().error.find("cannot connect") != std::string::npos);
}
