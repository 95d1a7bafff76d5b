#pragma once
// Where a rank sits in a tensor x pipeline x data parallel job (issue 45), from what every
// rank's snapshot says of its communicators: the one it sent to and received from its
// neighbours on (comms[].p2p: peers one comm rank away) is its pipeline communicator, and
// its rank there is its stage; the others it ran collectives on are its groups (tensor or
// data parallel: NCCL does not tell which, so they are named by their members). Megatron,
// DeepSpeed and TorchTitan build their groups this way, each a split of the world, and a
// GPU job's snapshots hold the same facts: the interposer counts every send and receive.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

struct RankGroup {
  std::string comm;
  std::vector<int> ranks;  // global ranks, in communicator rank order
};

struct PipelinePlace {
  int stage = 0;
  int stages = 0;
  std::vector<int> stage_ranks;   // every rank whose pipeline communicator has it at this stage
  RankGroup pipeline;             // its own pipeline communicator
  std::vector<RankGroup> groups;  // the other communicators it is in (size > 1), largest last
};

class PipelineLayout {
 public:
  explicit PipelineLayout(const JobData& job);

  // Nothing when the rank sent and received on no communicator, or on more than one, or
  // left no snapshot.
  std::optional<PipelinePlace> of(int rank) const;
  // Sends `from` issued to `to` on communicator `comm` (global ranks); nothing when `from`'s
  // snapshot does not count them (an older watchdog, or past its kept peers).
  std::optional<uint64_t> sends(const std::string& comm, int from, int to) const;
  std::optional<uint64_t> receives(const std::string& comm, int at, int from) const;

  // The count most transfer records of the job hold (every counted peer's sends and receives on
  // every communicator): in a job whose stages run one schedule, what each rank issued to each
  // neighbour. Nothing when no record counts any, or two counts are held equally often.
  std::optional<uint64_t> usualCount() const;

 private:
  const SnapshotComm* entry(int rank, const std::string& comm) const;
  std::optional<uint64_t> counted(const std::string& comm, int at, int peer_global,
                                  uint64_t SnapshotP2pPeer::*field) const;
  int commRankOf(const std::string& comm, int global) const;
  bool pipelineLike(const SnapshotComm& c) const;  // and not a ring exchange's communicator

  const JobData& job_;
  std::map<std::string, std::map<int, int>> members_;       // comm hash -> comm rank -> global rank
  std::map<std::pair<int, int>, std::set<int>> positions_;  // (size, rank) in a pipeline communicator -> ranks
  std::set<std::string> rings_;  // communicators some member exchanged with across the wrap
};

}  // namespace hangwatch::verdict
