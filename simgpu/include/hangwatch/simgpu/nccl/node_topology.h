#pragma once
// Which node each member of a communicator is on. NCCL groups ranks by a host hash of
// hostname + boot id (NCCL_HOSTID replaces it; src/misc/utils.cc getHostHash) and
// numbers nodes in order of first appearance by rank (src/init.cc, rankToNode).
// Connections inside a node are P2P/SHM, between nodes NET.
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"

namespace simnccl {

inline constexpr int kNodeKeyBytes = 128;

// This process's node, as a string all members compare: SIMGPU_HOSTID, else
// SIMGPU_RANKS_PER_NODE=N with the launcher rank (or, without a launcher, `comm_rank`)
// divided by N, else NCCL_HOSTID, else hostname + boot id. A malformed
// SIMGPU_RANKS_PER_NODE is an error for communicator init, as SIMGPU_FAULTS is.
hangwatch::Expected<std::string> localNodeKey(int comm_rank);

class NodeTopology {
 public:
  NodeTopology() = default;
  explicit NodeTopology(const std::vector<std::string>& key_of_rank);

  int nodes() const { return nnodes_; }
  int nodeOf(int rank) const { return node_of_[rank]; }
  // The connection from -> to crosses nodes: NCCL's NET transport carries it.
  bool crossesNodes(int from, int to) const { return node_of_[from] != node_of_[to]; }

 private:
  std::vector<int> node_of_;
  int nnodes_ = 1;
};

}  // namespace simnccl
