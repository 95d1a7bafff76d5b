#pragma once
// SIMGPU_FAULTS (DESIGN.md §3, contract): ';'-separated faults.
//   dead-rank=R@op=K                rank R's device stops inside its K-th collective
//   dead-link=A->B@op=K[,channel=C] from op K on, connection A->B delivers nothing more
//   slow-rank=R:F                   rank R's GEMMs, copies and kernels take 1/F of their whole time
//   slow-link=A->B:F                link A->B runs at fraction F of its bandwidth
//   lost-credit=A->B@op=K           from op K on, B's clear-to-send messages to A are lost
// Ranks are launcher ranks (RANK, OMPI_COMM_WORLD_RANK, ...); a process started without
// a launcher uses its communicator rank. Op indices count the collectives one rank issues
// on one communicator, from 0.
#include <cstdint>
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

  bool empty() const {
    return dead_ranks.empty() && dead_links.empty() && slow_ranks.empty() && slow_links.empty() &&
           lost_credits.empty();
  }
  bool rankDeadAt(int rank, uint64_t op) const;
  bool linkDeadAt(int from, int to, uint64_t op, int channel) const;
  bool creditLostAt(int from, int to, uint64_t op) const;
  double rankSpeed(int rank) const;  // product of matching slow-rank fractions, 1.0 if none
  double linkSpeed(int from, int to) const;
  // Error naming the first fault whose ranks are not below `world_size`.
  hangwatch::Expected<bool> checkRanksBelow(int world_size) const;
};

// Errors name the offending token, e.g. "bad fault 'dead-link=1-2@op=3': expected A->B".
hangwatch::Expected<FaultPlan> parseFaults(std::string_view spec);

// SIMGPU_FAULTS of this process, parsed once.
const hangwatch::Expected<FaultPlan>& processFaults();

}  // namespace simgpu
