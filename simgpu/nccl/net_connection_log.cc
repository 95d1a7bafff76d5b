#include "hangwatch/simgpu/nccl/net_connection_log.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <utility>

#include "hangwatch/simgpu/nccl/debug_log.h"

namespace simnccl {
namespace {

constexpr uint64_t kInitNet = subsys::kInit | subsys::kNet;

// NCCL_NET_SHARED_BUFFERS (src/transport/net.cc:163, default -2): connections made without a
// graph on connIndex 1 (point-to-point) share their buffers unless it is 0 (net.cc:294).
bool sharedBuffers(int conn_index) {
  if (conn_index == 0) return false;
  const char* v = std::getenv("NCCL_NET_SHARED_BUFFERS");
  return v == nullptr || std::atoll(v) != 0;
}

}  // namespace

void ConnectionLog::printConnection(const Want& want, int conn_index) const {
  const int peer_dev = view_.nvml_dev[static_cast<size_t>(want.peer)];
  const int my_dev = view_.nvml_dev[static_cast<size_t>(view_.rank)];
  const int net_dev = view_.net_dev[static_cast<size_t>(want.peer)];
  // ncclTopoCheckGdr: on a DGX H100 each GPU shares a PCI switch with its NIC, so IB uses
  // GPUDirect RDMA both ways; the socket transport cannot (host buffers only).
  const char* gdr = view_.net == NetKind::kIB ? "/GDRDMA" : "";
  const char* shared = sharedBuffers(conn_index) ? "/Shared" : "";
  if (want.send)
    debugLogOnDevice(view_.cuda_dev, kLogInfo, kInitNet, "sendSetup", 313,
                     "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s", want.channel, conn_index,
                     view_.rank, my_dev, want.peer, peer_dev, netName(view_.net), net_dev, gdr, "", shared);
  else
    debugLogOnDevice(view_.cuda_dev, kLogInfo, kInitNet, "recvSetup", 359,
                     "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s", want.channel, conn_index,
                     want.peer, peer_dev, view_.rank, my_dev, netName(view_.net), net_dev, gdr, "", shared);
}

void ConnectionLog::setup(std::vector<Want> wants, int conn_index) {
  const int n = nranks();
  auto order = [&](const Want& w) {
    const int i = w.send ? (w.peer - view_.rank + n) % n : (view_.rank - w.peer + n) % n;
    return std::tuple(i, w.send, w.channel);
  };
  std::sort(wants.begin(), wants.end(), [&](const Want& a, const Want& b) { return order(a) < order(b); });
  for (const Want& w : wants) {
    if (w.peer == view_.rank || view_.net_dev[static_cast<size_t>(w.peer)] < 0) continue;  // P2P/SHM, no NIC
    if (connected_.emplace(conn_index, w.channel, w.peer, w.send).second) printConnection(w, conn_index);
  }
}

void ConnectionLog::connectRing() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ring_ || nranks() < 2) return;
  ring_ = true;
  std::vector<Want> wants;
  const int n = nranks();
  for (int c = 0; c < view_.nchannels; ++c) {
    wants.push_back({c, (view_.rank + n - 1) % n, false});
    wants.push_back({c, (view_.rank + 1) % n, true});
  }
  setup(std::move(wants), 0);
  // With NCCL_LOCAL_REGISTER (on by default) the ranks agree on GDR: off once any of them
  // has a NET connection without it (generic.cc:26-35). simnccl's ring has no PXN.
  const bool gdr = view_.net == NetKind::kIB || view_.nnodes == 1;
  debugLogOnDevice(view_.cuda_dev, kLogInfo, subsys::kInit, "ncclTransportRingConnect", 37,
                   "Connected all rings, use ring PXN %d GDR %d", 0, gdr ? 1 : 0);
}

void ConnectionLog::connectTree(const std::vector<TreeLinks>& trees) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tree_ || nranks() < 2) return;
  tree_ = true;
  std::vector<Want> wants;
  for (int c = 0; c < view_.nchannels && c < static_cast<int>(trees.size()); ++c) {
    const TreeLinks& t = trees[static_cast<size_t>(c)];
    for (int child : t.down) {
      wants.push_back({c, child, false});
      wants.push_back({c, child, true});
    }
    if (t.up >= 0) {
      wants.push_back({c, t.up, true});
      wants.push_back({c, t.up, false});
    }
  }
  setup(std::move(wants), 0);
  debugLogOnDevice(view_.cuda_dev, kLogInfo, subsys::kInit, "ncclTransportTreeConnect", 56, "Connected all trees");
}

void ConnectionLog::connectPat() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pat_ || nranks() < 2) return;
  pat_ = true;
  const int n = nranks();
  for (int mask = 1; mask < n; mask <<= 1) {
    const int prev = (view_.rank + mask) % n;
    const int next = (view_.rank + n - mask) % n;
    for (const auto& [from, to] : {std::pair{prev, next}, {next, prev}}) {  // ReduceScatter's, AllGather's
      std::vector<Want> wants;
      for (int c = 0; c < view_.nchannels; ++c) {
        wants.push_back({c, from, false});
        wants.push_back({c, to, true});
      }
      setup(std::move(wants), 0);
    }
  }
  debugLogOnDevice(view_.cuda_dev, kLogInfo, subsys::kInit, "ncclTransportPatConnect", 79, "Connected binomial trees");
}

void ConnectionLog::connectP2p(int peer, bool send, int channel) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (connected_.count({1, channel, peer, send}) != 0) return;
  setup({{channel, peer, send}}, 1);
}

}  // namespace simnccl
