#include "hangwatch/common/nccl_bandwidth.h"

namespace hangwatch {
namespace {

// "ncclAllReduce", "AllReduce" and "allreduce" all name the same collective.
bool sameCollective(std::string_view api_name, std::string_view collective) {
  if (api_name.substr(0, 4) == "nccl") api_name.remove_prefix(4);
  if (api_name.size() != collective.size()) return false;
  for (size_t i = 0; i < api_name.size(); ++i) {
    char a = api_name[i], b = collective[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (b >= 'A' && b <= 'Z') b = static_cast<char>(b - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

}  // namespace

std::optional<double> busBandwidthFactor(std::string_view api_name, int nranks) {
  if (nranks <= 0) return std::nullopt;
  double n = nranks;
  if (sameCollective(api_name, "AllReduce")) return 2.0 * (n - 1) / n;
  if (sameCollective(api_name, "AllGather") || sameCollective(api_name, "ReduceScatter") ||
      sameCollective(api_name, "AllToAll") || sameCollective(api_name, "AlltoAll")) {
    return (n - 1) / n;
  }
  if (sameCollective(api_name, "Broadcast") || sameCollective(api_name, "Bcast") ||
      sameCollective(api_name, "Reduce") || sameCollective(api_name, "Send") || sameCollective(api_name, "Recv")) {
    return 1.0;
  }
  return std::nullopt;
}

double ncclTestsSizeBytes(std::string_view api_name, uint64_t api_bytes, int nranks) {
  double bytes = static_cast<double>(api_bytes);
  if (nranks > 0 && (sameCollective(api_name, "AllGather") || sameCollective(api_name, "ReduceScatter"))) {
    return bytes * nranks;
  }
  return bytes;
}

double gigabytesPerSecond(double size_bytes, double ns) { return ns > 0 ? size_bytes / ns : 0; }

}  // namespace hangwatch
