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

// The network NCCL's NET transport runs on between nodes. NCCL tries its networks in
// order (src/plugin/net.cc ncclNetInit: external plugins, then IB, then Socket), skips
// those whose name is not NCCL_NET's (strcasecmp; src/init.cc copies NCCL_NET into
// config.netName) and fails init with "Failed to initialize any NET plugin" when none is
// left; NCCL_IB_DISABLE=1 makes IB's init fail (src/transport/net_ib/init.cc).
//   kIB:     rendezvous: a send waits for the receiver's clear-to-send in SendPeerWait
//            (net_ib.cc ncclIbIsend returns no request until the receiver's FIFO post).
//   kSocket: eager: isend only queues the request (net_socket.cc), so a sender held
//            back by its receiver sits in SendWait.
// simnccl has no RDMA devices to probe, so with neither variable set the network is IB,
// as on the clusters NCCL's defaults are tuned for.
enum class NetKind { kIB, kSocket };
hangwatch::Expected<NetKind> netFromEnvironment();
const char* netName(NetKind net);

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
