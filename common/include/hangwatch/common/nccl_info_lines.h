#pragma once
// NCCL's INFO lines that say which NIC each network connection uses (the watchdog keeps them:
// watchdog_snapshot.h SnapshotNcclLog), parsed. Formats as NCCL 2.28.9 prints them:
//   src/transport/net.cc:313  "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s"
//                             (PXN: "NET/%s/%d(%d)..."; the proxy rank in parentheses)
//   src/transport/net.cc:359  "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s%s"
//   src/transport/net_ib.cc:839 "NET/IB : Using [0]mlx5_0:1/IB [1]... [RO]; OOB eth0:<addr>"
//   src/transport/net_ib.cc:649 "NET/IB : Made virtual device [%d] name=%s speed=%d ndevs=%d"
//   src/transport/net_socket.cc:76 "NET/Socket : Using [0]eth0:<addr>"
// A connection's line names ranks of its communicator, not the communicator: whoever matches
// one to a communicator's link must allow for another communicator with the same two ranks.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

// One NET connection's end in this process, as set up.
struct NcclNetLine {
  int channel = 0;
  int from = -1;      // the sender, a rank of the connection's communicator
  int to = -1;        // the receiver
  bool send = false;  // this process's end is the sender ("[send]") or the receiver ("[receive]")
  int net_dev = -1;   // NCCL's net device ("NET/IB/<netDev>")
};

// A net device NCCL named at its init: index as connection lines use it.
struct NcclNetDeviceName {
  int index = -1;
  std::string name;         // "mlx5_3", "mlx5_0+mlx5_1" (merged), "eth0"
  std::optional<int> port;  // IB's port; none for sockets or a merged device
};

struct NcclNetInfo {
  std::string net;                          // "IB", "Socket"; empty when no init line was seen
  std::vector<NcclNetDeviceName> devices;   // by the index connection lines use
  std::vector<NcclNetLine> connections;
  std::string unread;                       // why the watchdog had no lines (NCCL_DEBUG=WARN, ...)
  uint64_t lines_dropped = 0;               // beyond what the watchdog keeps, or past what it read
  const NcclNetDeviceName* device(int index) const;
};

// The lines of one process, as the watchdog kept them (NCCL's prefix included).
NcclNetInfo parseNcclInfoLines(const std::vector<std::string>& lines);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<NcclNetLine> {
  static constexpr const char* what = "nccl net line";
  static constexpr auto fields = std::tuple{
      field("channel", &NcclNetLine::channel, "nccl net channel"),
      field("from", &NcclNetLine::from, "nccl net from"),
      field("to", &NcclNetLine::to, "nccl net to"),
      field("send", &NcclNetLine::send, "nccl net send"),
      field("net_dev", &NcclNetLine::net_dev, "nccl net net_dev"),
  };
};

template <>
struct Schema<NcclNetDeviceName> {
  static constexpr const char* what = "nccl net device";
  static constexpr auto fields = std::tuple{
      field("index", &NcclNetDeviceName::index, "nccl net device index"),
      field("name", &NcclNetDeviceName::name, "nccl net device name"),
      field("port", &NcclNetDeviceName::port, "nccl net device port"),
  };
};

template <>
struct Schema<NcclNetInfo> {
  static constexpr const char* what = "nccl net info";
  static constexpr auto fields = std::tuple{
      field("net", &NcclNetInfo::net, "nccl net"),
      field("devices", &NcclNetInfo::devices, "nccl net devices"),
      field("connections", &NcclNetInfo::connections, "nccl net connections"),
      field("unread", &NcclNetInfo::unread, "nccl net unread", Empty::kOmit),
      field("lines_dropped", &NcclNetInfo::lines_dropped, "nccl net lines_dropped"),
  };
};

}  // namespace hangwatch::schema
