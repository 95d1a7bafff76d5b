#include "hangwatch/simgpu/nccl/net_devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/simgpu/config.h"
#include "hangwatch/simgpu/nccl/debug_log.h"

extern "C" {
__attribute__((visibility("default"))) simnccl_net_dev simnccl_net_devs[kSimncclMaxNetDevs];
__attribute__((visibility("default"))) int simnccl_nnet_devs = 0;
}

namespace simnccl {
namespace {

std::mutex table_mutex;

void fillTable(NetKind net) {
  std::lock_guard lock(table_mutex);
  const int count = net == NetKind::kIB ? kSimncclMaxNetDevs : 1;
  for (int i = 0; i < count; ++i) {
    simnccl_net_dev& d = simnccl_net_devs[i];
    std::string name = net == NetKind::kIB ? fmt::format("mlx5_{}", i) : "eth0";
    *fmt::format_to_n(d.devName, sizeof(d.devName) - 1, "{}", name).out = '\0';
    d.portNum = net == NetKind::kIB ? 1 : 0;
  }
  simnccl_nnet_devs = count;
}

// ncclSocketToString of the interface NCCL's ncclFindInterfaces picks (src/misc/socket.cc:89):
// "<address><port>", the port 0. Without NCCL_SOCKET_IFNAME NCCL skips docker*, lo* and virbr*
// while another interface has an address; simnccl calls every such interface eth0.
std::string oobAddress() {
  std::string found, loopback = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return loopback + "<0>";
  for (const ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    const bool skipped = std::strncmp(i->ifa_name, "lo", 2) == 0 || std::strncmp(i->ifa_name, "docker", 6) == 0 ||
                         std::strncmp(i->ifa_name, "virbr", 5) == 0;
    if (!skipped) found = text;
    else if (std::strncmp(i->ifa_name, "lo", 2) == 0) loopback = text;
  }
  freeifaddrs(list);
  return (found.empty() ? loopback : found) + "<0>";
}

}  // namespace

void logNetDevices(NetKind net, int cuda_dev) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (!debugEnabled(kLogInfo, subsys::kInit | subsys::kNet)) return;
    fillTable(net);
    std::string devices;
    for (int d = 0; d < simnccl_nnet_devs; ++d) {
      const simnccl_net_dev& dev = simnccl_net_devs[d];
      devices += net == NetKind::kIB ? fmt::format(" [{}]{}:{}/IB", d, dev.devName, dev.portNum)
                                     : fmt::format(" [{}]{}:{}", d, dev.devName, oobAddress());
    }
    if (net == NetKind::kSocket) {
      debugLogOnDevice(cuda_dev, kLogInfo, subsys::kInit | subsys::kNet, "ncclNetSocketInit", 76, "NET/Socket : Using%s",
                       devices.c_str());
      return;
    }
    // ncclIbRelaxedOrderingCapable: NCCL_IB_PCI_RELAXED_ORDERING=2 (the default) turns it on
    // where the verbs library has ibv_reg_mr_iova2, as on any current rdma-core.
    const char* ro = std::getenv("NCCL_IB_PCI_RELAXED_ORDERING");
    const bool relaxed = ro == nullptr || std::atoi(ro) != 0;
    debugLogOnDevice(cuda_dev, kLogInfo, subsys::kInit | subsys::kNet, "ncclIbInitDevices", 839,
                     "NET/IB : Using%s %s; OOB %s:%s", devices.c_str(), relaxed ? "[RO]" : "", "eth0",
                     oobAddress().c_str());
  });
}

int gpuOnNode(int device) {
  if (simgpu::simConfig().device_count > 1) return device;
  return hangwatch::detectRankIdentity().local_rank.value_or(0);
}

int localNetDev(NetKind net, int device) {
  fillTable(net);
  return net == NetKind::kIB ? gpuOnNode(device) % kSimncclMaxNetDevs : 0;
}

std::string netDevName(int index) {
  std::lock_guard lock(table_mutex);
  if (index < 0 || index >= simnccl_nnet_devs) return "";
  return simnccl_net_devs[index].devName;
}

}  // namespace simnccl
