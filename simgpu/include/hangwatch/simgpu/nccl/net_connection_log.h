#pragma once
// The INFO lines NCCL prints as it sets up a rank's NET connections (NCCL_DEBUG=INFO,
// subsystems INIT|NET), from which a reader learns which NIC each connection between
// nodes runs on (src/transport/net.cc of v2.28.9-1):
//   sendSetup :313  "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s"
//   recvSetup :359  "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s"
// (channel, connIndex, sender rank[nvmlDev], receiver rank[nvmlDev], the net's name, the
// NIC's index in its device table, "/GDRDMA", "(PCI)", "/Shared"), and once an algorithm's
// connections are all made, src/transport/generic.cc's "Connected all rings, use ring PXN %d
// GDR %d" (:37), "Connected all trees" (:56) or "Connected binomial trees" (:79), INIT.
//
// NCCL 2.28 connects at the first operation that needs an algorithm (NCCL_RUNTIME_CONNECT=1:
// ncclPrepareTasks -> ncclCollPreconnect, src/group.cc:144) and point-to-point peers at the
// first transfer with them (ncclP2PPreconnectFunc, connIndex 1); a connection made once is
// not made, nor printed, again: NCCL keys it by (channel, connIndex, peer, direction), so a
// tree's or PAT's connection that the ring already made on that channel prints nothing.
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "hangwatch/simgpu/nccl/algorithm.h"
#include "hangwatch/simgpu/nccl/node_topology.h"

namespace simnccl {

// What one rank's lines name.
struct ConnectionLogView {
  int rank = 0;
  int cuda_dev = 0;  // the communicator's device: NCCL connects with it current
  int nchannels = 1;
  int nnodes = 1;
  NetKind net = NetKind::kIB;
  std::vector<int> nvml_dev;  // per communicator rank: its GPU's index on its node
  std::vector<int> net_dev;   // per peer: this rank's NIC on connections with it, -1 inside a node
};

class ConnectionLog {
 public:
  explicit ConnectionLog(ConnectionLogView view) : view_(std::move(view)) {}

  // ncclTransportRingConnect, ncclTransportTreeConnect, ncclTransportPatConnect
  // (src/transport/generic.cc): every channel's connections of the algorithm, once.
  void connectRing();
  void connectTree(const std::vector<TreeLinks>& trees);
  void connectPat();
  // ncclTransportP2pSetup(comm, NULL, 1) for one point-to-point peer and direction.
  void connectP2p(int peer, bool send, int channel);

 private:
  struct Want {
    int channel;
    int peer;
    bool send;
  };
  int nranks() const { return static_cast<int>(view_.nvml_dev.size()); }
  // ncclTransportP2pSetup (src/transport.cc:117), under mutex_: peers in NCCL's order
  // (the i-th receive peer rank - i, then the i-th send peer rank + i, channels ascending).
  void setup(std::vector<Want> wants, int conn_index);
  void printConnection(const Want& want, int conn_index) const;

  ConnectionLogView view_;
  std::mutex mutex_;
  std::set<std::tuple<int, int, int, bool>> connected_;  // (connIndex, channel, peer, send)
  bool ring_ = false, tree_ = false, pat_ = false;
};

}  // namespace simnccl
