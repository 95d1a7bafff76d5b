#pragma once
// SIMGPU_FAULTS (DESIGN.md §3, contract): ';'-separated faults.
//   dead-rank=R@op=K                rank R's device stops inside its K-th collective
//   dead-link=A->B@op=K[,channel=C] from op K on, connection A->B delivers nothing more
//   slow-rank=R:F                   rank R's GEMMs, copies and kernels take 1/F of their whole time
//   slow-link=A->B:F                link A->B runs at fraction F of its bandwidth
//   lost-credit=A->B@op=K           from op K on, B's clear-to-send messages to A are lost
//   dead-nic=HOST:DEVICE@op=K       from op K on, every connection between nodes that the NIC
//                                   DEVICE (mlx5_0..mlx5_7, eth0) of HOST carries delivers nothing
// Ranks are launcher ranks (RANK, OMPI_COMM_WORLD_RANK, ...); a process started without
// a launcher uses its communicator rank. Op indices count the collectives one rank issues
// on one communicator, from 0.
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangwatch/common/expected.h"

namespace simgpu {

struct DeadRankFault {
  std::string token;  // as written in SIMGPU_FAULTS, for error messages
  int rank;
  uint64_t op;
};
struct DeadLinkFault {
  std::string token;
  int from;
  int to;
  uint64_t op;
  std::optional<int> channel;  // every channel when empty
};
// The reverse direction of a link fails: A keeps the credits it had, data A->B still flows.
struct LostCreditFault {
  std::string token;
  int from;
  int to;
  uint64_t op;
};
// A NIC that stops: every connection between nodes it carries, at either end, on any
// communicator and algorithm. HOST is the host's name (gethostname), DEVICE the NIC's
// (net_devices.h).
struct DeadNicFault {
  std::string token;
  std::string host;
  std::string device;
  uint64_t op;
};
struct SlowRankFault {
  std::string token;
  int rank;
  double fraction;
};
struct SlowLinkFault {
  std::string token;
  int from;
  int to;
  double fraction;
};

struct FaultPlan {
  std::vector<DeadRankFault> dead_ranks;
  std::vector<DeadLinkFault> dead_links;
  std::vector<SlowRankFault> slow_ranks;
  std::vector<SlowLinkFault> slow_links;
  std::vector<LostCreditFault> lost_credits;
  std::vector<DeadNicFault> dead_nics;

  bool empty() const {
    return dead_ranks.empty() && dead_links.empty() && slow_ranks.empty() && slow_links.empty() &&
           lost_credits.empty() && dead_nics.empty();
  }
  // The fault that applies, or null: a dead rank, a dead link, a lost clear-to-send.
  const DeadRankFault* deadRankAt(int rank, uint64_t op) const;
  const DeadLinkFault* deadLinkAt(int from, int to, uint64_t op, int channel) const;
  const LostCreditFault* lostCreditAt(int from, int to, uint64_t op) const;
  const DeadNicFault* deadNicAt(const std::string& host, const std::string& device, uint64_t op) const;
  bool rankDeadAt(int rank, uint64_t op) const { return deadRankAt(rank, op) != nullptr; }
  bool linkDeadAt(int from, int to, uint64_t op, int channel) const { return deadLinkAt(from, to, op, channel) != nullptr; }
  bool creditLostAt(int from, int to, uint64_t op) const { return lostCreditAt(from, to, op) != nullptr; }
  double rankSpeed(int rank) const;  // product of matching slow-rank fractions, 1.0 if none
  double linkSpeed(int from, int to) const;
  // Error naming the first fault whose ranks are not below `world_size`.
  hangwatch::Expected<bool> checkRanksBelow(int world_size) const;
};

// Errors name the offending token, e.g. "bad fault 'dead-link=1-2@op=3': expected A->B".
hangwatch::Expected<FaultPlan> parseFaults(std::string_view spec);

// SIMGPU_FAULTS of this process, parsed once.
const hangwatch::Expected<FaultPlan>& processFaults();

// Which of this process's faults took effect (DESIGN.md §3): a fault that never did (its op was
// never reached, or the collectives from then on used no connection it breaks) is said when
// the process ends, one line each, by the process it belongs to: a link fault's sender, a rank
// fault's rank. Filled by simnccl (ran, fired) and simcuda (slow ranks).
class FaultLedger {
 public:
  static FaultLedger& instance();
  // Has the process's ledger print its unfired faults when the process exits, or before, when
  // a communicator is aborted (the job ends there, and its launcher may kill it): once.
  static void reportAtExit();
  static void report();

  // The fault `token` (as written in SIMGPU_FAULTS) changed what happened.
  void fired(const std::string& token);
  // A collective or point-to-point operation this process ran as rank `self` (its rank as
  // `plan` names ranks): its op index, NCCL's name of its algorithm, and the ranks it sends to.
  void ran(const FaultPlan& plan, int self, uint64_t op, const char* algorithm, const std::vector<int>& sends_to);
  // A rank this process runs as (`self`, as `plan` names ranks) uses NIC `device` of `host`;
  // `member_host`/`member_device` is a NIC some member of its communicators uses.
  void usesNic(const FaultPlan& plan, int self, const std::string& host, const std::string& device);
  void sawNic(const std::string& host, const std::string& device);
  // One sentence per fault of `plan` that belongs to this process (a rank it ran as) and never
  // took effect; `device_rank` is this process's rank for slow-rank faults (and, as rank 0,
  // the one that says a NIC fault no member of its communicators uses).
  std::vector<std::string> unfired(const FaultPlan& plan, int device_rank) const;

 private:
  struct FirstOp {  // the first operation a link or rank fault's op index allowed it in
    uint64_t op = 0;
    std::string algorithm;
    std::vector<int> sends_to;
  };
  void noteFrom(const std::string& token, uint64_t from_op, uint64_t op, const char* algorithm,
                const std::vector<int>& sends_to);

  mutable std::mutex mutex_;
  bool reported_ = false;
  std::map<int, uint64_t> ops_;  // per rank this process ran as: one past its highest op index
  std::set<std::string> fired_;
  std::map<std::string, FirstOp> first_;
  std::map<std::string, std::set<std::string>> algorithms_;  // every algorithm run from the fault's op on
  std::map<int, std::set<int>> sent_to_;  // per rank this process ran as: every rank it sent to
  std::map<std::string, int> nic_owner_;  // NIC fault token -> the rank this process runs as that uses it
  std::set<std::string> nics_seen_;       // "host:device" of every member of this process's communicators
};

}  // namespace simgpu
