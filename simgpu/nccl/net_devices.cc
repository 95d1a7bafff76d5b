#include "hangwatch/simgpu/nccl/net_devices.h"

#include <mutex>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/simgpu/config.h"

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

}  // namespace

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
