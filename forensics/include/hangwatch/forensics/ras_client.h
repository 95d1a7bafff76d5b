#pragma once
// A client of NCCL's RAS service (NCCL 2.24+, on unless NCCL_RAS_ENABLE=0). Every NCCL
// process runs a RAS thread that keeps the job's processes networked with keepalives and
// listens for clients on NCCL_RAS_ADDR (default localhost:28028, SO_REUSEPORT: any process
// of the node answers). STATUS gathers every process's communicators with a RAS collective;
// a member whose process does not answer within the leg timeout (5 s) is listed missing and
// "unresponsive", and "considered_dead" once unreachable for 60 s (NCCL 2.28:
// src/ras/client_support.cc, line protocol :340-400, JSON writers :1919-2010 and
// rasDumpCommsToJSON :2095; timeouts src/ras/ras_internal.h :14, :196-227).
//
// This is what a GPU job has to tell a process that is gone from one that merely did not
// dump, when nobody on its node is left to look: RAS runs beside NCCL's own transport, so it
// notices a peer gone where an InfiniBand queue pair with nothing posted never does.
#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/forensics_dump.h"

namespace hangwatch::forensics {

constexpr const char* kRasDefaultAddress = "localhost:28028";  // NCCL_RAS_CLIENT_PORT
// Leg timeout (5 s) + the collective's extra (5 s), and room for an answering process that a
// node peer's collector holds stopped for a while.
constexpr double kRasAnswerBoundS = 20;

// Where the process's NCCL listens for RAS clients: its NCCL_RAS_ADDR, else NCCL's default.
// An error when its RAS is off (NCCL_RAS_ENABLE=0) or its environment is unreadable.
Expected<std::string> rasAddressOf(const std::map<std::string, std::string>& environment);

// Asks `address` ("host:port", "[v6]:port") for STATUS in JSON, waiting at most
// `bound_s` for the whole answer. Never throws; `error` says why nothing usable came back.
// `asked`, if given, is called once: when a RAS thread that answered the protocol line has the
// question, or when asking failed.
RasStatus askRas(const std::string& address, double bound_s = kRasAnswerBoundS,
                 const std::function<void()>& asked = {});

// What `forensics ras` does, which a rank's watchdog starts when no collector runs
// (HANGWATCH_COLLECT=0): asks the RAS of process `pid`'s node, at the process's own RAS address,
// and says who asked ("ras-command"). Nothing is stopped meanwhile, so RAS answers at once for
// every member that runs; one that does not costs RAS's leg timeout. `error` says why nothing was
// asked: the process is gone, has no NCCL mapped, or has RAS off.
RasAnswer askRasForProcess(pid_t pid, std::optional<int> rank, double bound_s = kRasAnswerBoundS);

// askRas on a thread of its own. `ask` returns once the question is in (a running RAS thread
// took it) or asking failed; the answer, which takes RAS's leg timeout (5 s) when a member does
// not answer, is gathered meanwhile, while the caller goes on stopping and reading its process.
class RasQuestion {
 public:
  static std::unique_ptr<RasQuestion> ask(const std::string& address, double bound_s = kRasAnswerBoundS);
  RasStatus wait();  // the answer, or why there is none
  ~RasQuestion();
  RasQuestion(const RasQuestion&) = delete;
  RasQuestion& operator=(const RasQuestion&) = delete;

 private:
  RasQuestion() = default;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool asked_ = false;
  RasStatus answer_;
};

// The communicators of a STATUS answer in JSON (what follows the protocol's reply lines).
Expected<std::vector<RasComm>> parseRasCommunicators(const std::string& json_text);

// The whole reply of the server: "SERVER PROTOCOL n", "OK" lines, then the JSON document;
// an "ERROR: ..." line instead of the document (an NCCL before 2.28 has no JSON) is the error.
Expected<std::vector<RasComm>> parseRasReply(const std::string& reply);

}  // namespace hangwatch::forensics
