#pragma once
// simnccl's RAS client service, as NCCL 2.24+ runs one in every process (src/ras/): a
// thread listening on NCCL_RAS_ADDR ("localhost:28028", SO_REUSEADDR and SO_REUSEPORT,
// client_support.cc rasClientInitSocket) that speaks NCCL's line protocol (client
// protocol 2, TIMEOUT, SET FORMAT, STATUS) and answers STATUS in NCCL's JSON layout.
// Real RAS floods STATUS over its own network of every process of the job and merges what
// each process reports of its own ranks (collectives.cc rasNetSendCollReq, rasCollCommsMerge).
// simnccl's stand-in for that network: each process's RAS thread also answers the others on
// an abstract unix socket named for its pid, and the asker asks every member process of the
// communicators it learns of, round after round, as NCCL's flood reaches them. A process that
// is gone refuses at once (NCCL: its link socket closed, the leg purged, rasnet.cc); one that
// stopped answering keepalives RAS_KEEPALIVE_TIMEOUT_WARN ago is not asked (its connection
// "experiencing delays", collectives.cc); any other that does not answer is waited for up to
// the client's timeout.
// Started with the first registered communicator unless NCCL_RAS_ENABLE=0; never stopped
// (the object is leaked on purpose, its threads end with the process).
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace simnccl {

class Communicator;
class SharedSegment;

// What NCCL multiplies its RAS timeouts by (NCCL_RAS_TIMEOUT_FACTOR, src/ras/ras.cc).
int rasTimeoutFactor();

// One member of a reported communicator, as its shared segment has it.
struct RasMember {
  int rank = 0;
  std::string host;
  int pid = 0;
  int cuda_dev = 0;
  int async_error = 0;
  bool abort_flag = false;
  bool reported = true;          // a process that answered holds it ("ranks"); else "missing_ranks"
  bool unresponsive = false;     // missing: its process did not answer
  bool considered_dead = false;  // unanswering for RAS_PEER_DEAD_TIMEOUT, as the keepalive looks saw
};

struct RasComm {
  uint64_t hash = 0;            // communicatorId(): the commId a profiler plugin is given
  uint64_t host_hash = 0;       // secondary_hash: rank 0's host and pid
  uint64_t pid_hash = 0;
  int size = 0;
  std::vector<RasMember> members;  // by rank
};

// What a STATUS answer reports (ras/client_support.cc rasDumpCommsToJSON).
struct RasStatus {
  int cuda_runtime_version = 0;
  int cuda_driver_version = 0;
  std::string timestamp;  // "%F %T", local time
  std::vector<RasComm> comms;
  double collection_time_sec = 0;
  int timeouts_count = 0;
};

// The JSON document, laid out byte for byte as NCCL's json writers do (without
// "collective_counts", which simnccl does not count).
std::string rasStatusJson(const RasStatus& status);

// Whether the member processes answer, as the RAS thread's once-a-second keepalive looks
// saw them: one continuously unanswering for `dead_after` (RAS_PEER_DEAD_TIMEOUT, 60 s x
// NCCL_RAS_TIMEOUT_FACTOR, ras_internal.h) is considered dead. Time is a parameter so a
// test can drive it.
class RasPeerLiveness {
 public:
  using Clock = std::chrono::steady_clock;
  using Peer = std::pair<std::string, int>;  // host, pid

  explicit RasPeerLiveness(Clock::duration dead_after) : dead_after_(dead_after) {}
  void look(const Peer& peer, bool answers, Clock::time_point now);
  bool consideredDead(const Peer& peer) const;
  // How long the looks have seen it unanswering without a break (zero: it answered last).
  Clock::duration silentFor(const Peer& peer) const;

 private:
  struct Unanswering {
    Clock::time_point first;
    Clock::time_point last;
  };
  Clock::duration dead_after_;
  std::map<Peer, Unanswering> unanswering_;
};

class RasServer {
 public:
  // From Communicator::join once the communicator exists; `segment` is the communicator's
  // and lives as long as it does. Starts the server on first use.
  static void registerComm(const Communicator* comm, SharedSegment* segment, uint64_t hash);
  // Before the communicator or its segment goes (Communicator::shutdown); idempotent.
  static void unregisterComm(const Communicator* comm);
};

}  // namespace simnccl
