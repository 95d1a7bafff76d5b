#include "hangwatch/simgpu/nccl/node_topology.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"

namespace simnccl {
namespace {

const char* nonEmptyEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// NCCL's default host hash input: the full hostname followed by the kernel's boot id.
std::string hostAndBootId() {
  std::string key = hangwatch::hostName();
  if (key.empty()) key = "unknown";
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot_id >> id) key += id;
  return key;
}

}  // namespace

hangwatch::Expected<std::string> localNodeKey(int comm_rank) {
  if (const char* id = nonEmptyEnv("SIMGPU_HOSTID")) return "hostid:" + std::string(id);
  if (const char* text = nonEmptyEnv("SIMGPU_RANKS_PER_NODE")) {
    errno = 0;
    char* end = nullptr;
    long per_node = std::strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || per_node < 1 || per_node > 1'000'000)
      return hangwatch::Error{"SIMGPU_RANKS_PER_NODE='" + std::string(text) + "': expected a whole number >= 1"};
    const int rank = hangwatch::detectRankIdentity().rank.value_or(comm_rank);
    return fmt::format("node:{}", rank / per_node);
  }
  if (const char* id = nonEmptyEnv("NCCL_HOSTID")) return "hostid:" + std::string(id);
  return "host:" + hostAndBootId();
}

hangwatch::Expected<NetKind> netFromEnvironment() {
  const char* ib_disable = nonEmptyEnv("NCCL_IB_DISABLE");
  const bool ib = ib_disable == nullptr || std::strtol(ib_disable, nullptr, 10) == 0;
  const char* name = nonEmptyEnv("NCCL_NET");
  if (name == nullptr) return ib ? NetKind::kIB : NetKind::kSocket;
  if (::strcasecmp(name, "IB") == 0 && ib) return NetKind::kIB;
  if (::strcasecmp(name, "Socket") == 0) return NetKind::kSocket;
  return hangwatch::Error{fmt::format("NCCL_NET={}: failed to initialize any NET plugin (simnccl has {})", name,
                                      ib ? "IB and Socket" : "Socket; NCCL_IB_DISABLE is set")};
}

const char* netName(NetKind net) { return net == NetKind::kIB ? "IB" : "Socket"; }

NodeTopology::NodeTopology(const std::vector<std::string>& key_of_rank) : node_of_(key_of_rank.size()), nnodes_(0) {
  std::vector<const std::string*> first_of_node;
  for (size_t r = 0; r < key_of_rank.size(); ++r) {
    size_t node = 0;
    while (node < first_of_node.size() && *first_of_node[node] != key_of_rank[r]) ++node;
    if (node == first_of_node.size()) first_of_node.push_back(&key_of_rank[r]);
    node_of_[r] = static_cast<int>(node);
  }
  nnodes_ = static_cast<int>(first_of_node.size());
}

}  // namespace simnccl
