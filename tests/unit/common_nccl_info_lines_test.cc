// NCCL's INFO lines naming each network connection's NIC, parsed as NCCL 2.28.9 prints them
// (nccl_info_lines.h names each format's place in NCCL's source).
#include <catch2/catch.hpp>

#include "hangwatch/common/nccl_info_lines.h"

using namespace hangwatch;

TEST_CASE("ConnectionLinesGiveEachEndsNetDeviceAndTheInitLineItsName") {
  NcclNetInfo info = parseNcclInfoLines({
      "node-0:77:78 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
      "node-0:77:78 [0] NCCL INFO ncclCommInitRank comm 0x5581 rank 3 nranks 8 cudaDev 0 nvmlDev 3 busId 1b000 commId "
      "0x1852e9190e780d2a - Init START",
      "[2026-12-01 08:00:00] node-0:77:79 [0] NCCL INFO Channel 02/0 : 3[3] -> 4[0] [send] via NET/IB/1/GDRDMA",
      "node-0:77:79 [0] NCCL INFO Channel 03/1 : 4[0] -> 3[3] [receive] via NET/IB/2",
      "node-0:77:79 [0] NCCL INFO Channel 04/0 : 3[3] -> 12[0] [send] via NET/IB/0(5)/GDRDMA/Shared",  // PXN
      "node-0:77:79 [0] NCCL INFO Channel 02/0 : 2[2] -> 3[3] via P2P/CUMEM/read",                    // inside a node
      "node-0:77:79 [0] NCCL INFO Channel 02/0 : 3[3] -> 4[0] [sideways] via NET/IB/1",               // not NCCL's
  });
  CHECK(info.net == "IB");
  REQUIRE(info.devices.size() == 3);
  CHECK(info.device(2)->name == "mlx5_2");
  CHECK(info.device(2)->port == std::optional<int>(1));
  REQUIRE(info.connections.size() == 3);
  const NcclNetLine& send = info.connections[0];
  CHECK(send.channel == 2);
  CHECK(send.from == 3);
  CHECK(send.to == 4);
  CHECK(send.send);
  CHECK(send.net_dev == 1);
  CHECK_FALSE(info.connections[1].send);
  CHECK(info.connections[1].from == 4);
  CHECK(info.connections[1].net_dev == 2);
  CHECK(info.connections[2].net_dev == 0);
}

TEST_CASE("VirtualDevicesNameWhatConnectionsIndexAndMergedOnesHaveNoPort") {
  NcclNetInfo info = parseNcclInfoLines({
      "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>",
      "h:1:1 [0] NCCL INFO NET/IB : Made virtual device [0] name=mlx5_0 speed=400000 ndevs=1",
      "h:1:1 [0] NCCL INFO NET/IB : Made virtual device [1] name=mlx5_1 speed=400000 ndevs=1",
      "h:1:1 [0] NCCL INFO NET/IB : Made virtual device [2] name=mlx5_0+mlx5_1 speed=800000 ndevs=2",
  });
  CHECK(info.device(1)->port == std::optional<int>(1));
  CHECK(info.device(2)->name == "mlx5_0+mlx5_1");
  CHECK_FALSE(info.device(2)->port);
}

TEST_CASE("SocketDevicesHaveNoPort") {
  NcclNetInfo info = parseNcclInfoLines({
      "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:fe80::1%eth1<0>",
      "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/1",
  });
  CHECK(info.net == "Socket");
  CHECK(info.device(1)->name == "eth1");
  CHECK_FALSE(info.device(0)->port);
  REQUIRE(info.connections.size() == 1);
  CHECK(info.connections[0].net_dev == 1);
  CHECK(parseNcclInfoLines({"garbage", "", "h:1:1 [0] NCCL WARN NET/IB : Using [0]x:1/IB"}).devices.empty());
}
