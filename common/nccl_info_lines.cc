#include "hangwatch/common/nccl_info_lines.h"

#include <cstdio>
#include <cstring>
#include <string_view>

namespace hangwatch {
namespace {

// The message after NCCL's "host:pid:tid [dev] NCCL INFO " prefix; empty when not an INFO line.
std::string_view messageOf(std::string_view line) {
  static constexpr std::string_view kInfo = " NCCL INFO ";
  const size_t at = line.find(kInfo);
  return at == std::string_view::npos ? std::string_view() : line.substr(at + kInfo.size());
}

bool startsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

void setDevice(std::vector<NcclNetDeviceName>& table, NcclNetDeviceName d) {
  for (NcclNetDeviceName& e : table)
    if (e.index == d.index) {
      e = std::move(d);
      return;
    }
  table.push_back(std::move(d));
}

// " [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ..." or " [0]eth0:10.0.0.1<0> [1]...".
void takeUsing(NcclNetInfo& info, std::string_view list, bool ib) {
  list = list.substr(0, list.find(';'));
  for (size_t at = list.find(" ["); at != std::string_view::npos; at = list.find(" [", at + 2)) {
    std::string_view item = list.substr(at + 2, list.find(" [", at + 2) - (at + 2));
    const size_t close = item.find(']'), colon = item.find(':');
    if (close == std::string_view::npos || colon == std::string_view::npos || colon < close) continue;
    NcclNetDeviceName d;
    if (std::sscanf(std::string(item.substr(0, close)).c_str(), "%d", &d.index) != 1) continue;
    d.name = std::string(item.substr(close + 1, colon - close - 1));
    int port = 0;
    if (ib && std::sscanf(std::string(item.substr(colon + 1)).c_str(), "%d", &port) == 1) d.port = port;
    setDevice(info.devices, std::move(d));
  }
}

bool takeConnection(NcclNetInfo& info, std::string_view message) {
  int channel = 0, conn = 0, from = -1, from_dev = -1, to = -1, to_dev = -1, dev = -1;
  char side[16] = {}, net[32] = {};
  const std::string text(message);
  if (std::sscanf(text.c_str(), "Channel %d/%d : %d[%d] -> %d[%d] [%15[a-z]] via NET/%31[^/]/%d", &channel, &conn, &from,
                  &from_dev, &to, &to_dev, side, net, &dev) != 9)
    return false;
  if (std::strcmp(side, "send") != 0 && std::strcmp(side, "receive") != 0) return false;
  info.connections.push_back({channel, from, to, std::strcmp(side, "send") == 0, dev});
  if (info.net.empty()) info.net = net;
  return true;
}

}  // namespace

const NcclNetDeviceName* NcclNetInfo::device(int index) const {
  for (const NcclNetDeviceName& d : devices)
    if (d.index == index) return &d;
  return nullptr;
}

NcclNetInfo parseNcclInfoLines(const std::vector<std::string>& lines) {
  NcclNetInfo info;
  std::vector<NcclNetDeviceName> virtual_devices;
  for (const std::string& line : lines) {
    const std::string_view m = messageOf(line);
    if (startsWith(m, "NET/IB : Using")) {
      info.net = "IB";
      takeUsing(info, m.substr(std::strlen("NET/IB : Using")), true);
    } else if (startsWith(m, "NET/Socket : Using")) {
      info.net = "Socket";
      takeUsing(info, m.substr(std::strlen("NET/Socket : Using")), false);
    } else if (startsWith(m, "NET/IB : Made virtual device")) {
      NcclNetDeviceName d;
      char name[256] = {};
      if (std::sscanf(std::string(m).c_str(), "NET/IB : Made virtual device [%d] name=%255s", &d.index, name) == 2) {
        d.name = name;
        virtual_devices.push_back(std::move(d));
      }
    } else if (startsWith(m, "Channel ")) {
      takeConnection(info, m);
    }
  }
  // IB's connections index its virtual devices (one per port first, in order, then merged
  // ones): where NCCL printed them, they name the device; a plain one keeps its port.
  // A plain one was made with the physical port's index; two ports of one device share a name.
  for (NcclNetDeviceName& v : virtual_devices) {
    if (const NcclNetDeviceName* p = info.device(v.index); p != nullptr && p->name == v.name) v.port = p->port;
  }
  for (NcclNetDeviceName& v : virtual_devices) setDevice(info.devices, std::move(v));
  return info;
}

}  // namespace hangwatch
