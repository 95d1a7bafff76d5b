#pragma once
// The NICs simnccl's NET transport runs on, as on a DGX H100: one InfiniBand NIC per GPU,
// mlx5_0..mlx5_7, port 1, GPU g using mlx5_g (the NIC behind its PCI switch, NCCL's topology
// choice there). NCCL_NET=Socket: one interface per node, eth0.
//
// NCCL keeps the same facts in its host state, where a debugger reads them: a NET connector's
// proxy connection holds send/recvNetResources.netDev (src/transport/net.cc), an index into the
// net's device table: IB's ncclIbMergedDevs[netDev].devName with ncclIbDevs[...].portNum
// (src/transport/net_ib.cc), Socket's ncclNetSocketDevs[netDev].devName (net_socket.cc).
// simnccl keeps a table of that shape, simnccl_net_devs, and each SendEnd/RecvEnd its net_dev.
#include <string>

#include "hangwatch/simgpu/nccl/node_topology.h"

extern "C" {
struct simnccl_net_dev {
  char devName[80];
  int portNum;  // 0: the device has no port (a socket interface)
};
inline constexpr int kSimncclMaxNetDevs = 8;
extern simnccl_net_dev simnccl_net_devs[kSimncclMaxNetDevs];
extern int simnccl_nnet_devs;
}

namespace simnccl {

// This process's GPU `device` as its node numbers it: the device index where the process
// sees several (the default, SIMGPU_DEVICE_COUNT=8), its launcher's local rank where it sees
// one (a launcher that gives each process its own GPU through CUDA_VISIBLE_DEVICES).
int gpuOnNode(int device);

// Fills the device table for `net` (once per process; every communicator agrees) and returns
// the index of the device that carries GPU `device`'s connections between nodes.
int localNetDev(NetKind net, int device);

// The device's name ("mlx5_3", "eth0"); empty for an index outside the table.
std::string netDevName(int index);

// The line NCCL's net prints once per process when its devices are found, at the first
// communicator's ncclNetInit, before its "Init START" (INIT|NET), on `cuda_dev`:
// IB  "NET/IB : Using [0]mlx5_0:1/IB ... [7]mlx5_7:1/IB [RO]; OOB eth0:<addr><0>" (net_ib.cc:839)
// Socket "NET/Socket : Using [0]eth0:<addr><0>" (net_socket.cc:76)
// <addr> is this machine's first IPv4 address off loopback (NCCL's ncclFindInterfaces).
void logNetDevices(NetKind net, int cuda_dev);

}  // namespace simnccl
