#include "hangwatch/simgpu/nccl/algorithm.h"

#include <strings.h>

#include <cstdlib>

#include <fmt/format.h>

namespace simnccl {
namespace {

const char* const kFunctionNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
const char* const kAlgoNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr int kTreeIndex = 0;
constexpr int kRingIndex = 1;

int functionIndex(OpKind kind) {
  switch (kind) {
    case OpKind::Broadcast: return 0;
    case OpKind::Reduce: return 1;
    case OpKind::AllGather: return 2;
    case OpKind::ReduceScatter: return 3;
    case OpKind::AllReduce: return 4;
    default: return -1;
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));  // strtok_r skips empty tokens
    start = end + 1;
  }
  return out;
}

// ncclGetBtree: the binary tree rooted at 0 that alternates leaves and inner items.
void binaryTree(int n, int i, int& up, int& down0, int& down1) {
  int bit = 1;
  while (bit < n && (bit & i) == 0) bit <<= 1;
  if (i == 0) {
    up = down0 = -1;
    down1 = n > 1 ? bit >> 1 : -1;
    return;
  }
  up = (i ^ bit) | (bit << 1);
  if (up >= n) up = i ^ bit;
  int low = bit >> 1;
  down0 = low == 0 ? -1 : i - low;
  down1 = low == 0 ? -1 : i + low;
  while (down1 >= n) {
    down1 = low == 0 ? -1 : i + low;
    low >>= 1;
  }
}

}  // namespace

const char* algoName(Algo algo) { return algo == Algo::kTree ? "TREE" : "RING"; }

hangwatch::Expected<AlgoTable> AlgoTable::fromEnvironment() {
  const char* spec = std::getenv("NCCL_ALGO");
  return parse(spec != nullptr ? spec : "");
}

hangwatch::Expected<AlgoTable> AlgoTable::parse(const std::string& spec) {
  AlgoTable t;
  t.spec_ = spec;
  for (auto& f : t.enabled_) f.fill(true);
  const std::vector<std::string> entries = split(spec, ';');
  for (size_t e = 0; e < entries.size(); ++e) {
    std::string prefix, list = entries[e];
    if (size_t colon = list.find(':'); colon != std::string::npos) {
      prefix = list.substr(0, colon);
      list = list.substr(colon + 1);
    } else if (e > 0) {
      return hangwatch::Error{fmt::format("NCCL_ALGO={}: all entries except the first must have a prefix", spec)};
    }
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    bool found = false;
    for (int f = 0; f < kFunctions; ++f) {
      if (!prefix.empty() && ::strcasecmp(prefix.c_str(), kFunctionNames[f]) != 0) continue;
      found = true;
      t.enabled_[f].fill(exclude);
      for (const std::string& name : split(list, ',')) {
        int a = 0;
        while (a < kAlgorithms && ::strcasecmp(name.c_str(), kAlgoNames[a]) != 0) ++a;
        if (a == kAlgorithms)
          return hangwatch::Error{fmt::format("NCCL_ALGO={}: unrecognized element token \"{}\"", spec, name)};
        t.enabled_[f][a] = !exclude;
      }
    }
    if (!found) return hangwatch::Error{fmt::format("NCCL_ALGO={}: unrecognized prefix \"{}\"", spec, prefix)};
  }
  return t;
}

hangwatch::Expected<Algo> AlgoTable::choose(OpKind kind) const {
  const int f = functionIndex(kind);
  if (f < 0) return Algo::kRing;  // point-to-point has no algorithm
  if (enabled_[f][kRingIndex]) return Algo::kRing;
  if (kind == OpKind::AllReduce && enabled_[f][kTreeIndex]) return Algo::kTree;
  return hangwatch::Error{fmt::format("No algorithm/protocol available for function {}. NCCL_ALGO was set to {} "
                                      "(simnccl runs Ring, and Tree for AllReduce)",
                                      kFunctionNames[f], spec_)};
}

void doubleBinaryTree(int n, int i, int which, int& up, int& down0, int& down1) {
  if (which == 0) return binaryTree(n, i, up, down0, down1);
  // The second tree: mirrored for an even count, shifted by one for an odd one.
  const bool mirror = n % 2 == 0;
  const int j = mirror ? n - 1 - i : (i - 1 + n) % n;
  binaryTree(n, j, up, down0, down1);
  auto back = [&](int x) { return x == -1 ? -1 : (mirror ? n - 1 - x : (x + 1) % n); };
  up = back(up);
  down0 = back(down0);
  down1 = back(down1);
}

TreeLinks treeLinks(const NodeTopology& nodes, int nranks, int rank, int channel, int nchannels) {
  // NCCL duplicates its channels: [0, n) run tree 0, [n, 2n) tree 1.
  const int which = nchannels >= 2 && 2 * channel >= nchannels ? 1 : 0;
  std::vector<int> local;
  std::vector<int> head(static_cast<size_t>(nodes.nodes()), -1);
  for (int r = 0; r < nranks; ++r) {
    if (nodes.nodeOf(r) == nodes.nodeOf(rank)) local.push_back(r);
    if (head[static_cast<size_t>(nodes.nodeOf(r))] == -1) head[static_cast<size_t>(nodes.nodeOf(r))] = r;
  }
  size_t i = 0;
  while (local[i] != rank) ++i;
  TreeLinks t;
  int up = -1, d0 = -1, d1 = -1;
  doubleBinaryTree(nodes.nodes(), nodes.nodeOf(rank), which, up, d0, d1);
  if (i > 0) t.up = local[i - 1];
  else if (up != -1) t.up = head[static_cast<size_t>(up)];
  if (i + 1 < local.size()) t.down.push_back(local[i + 1]);
  if (i == 0) {
    for (int d : {d0, d1})
      if (d != -1) t.down.push_back(head[static_cast<size_t>(d)]);
  }
  return t;
}

}  // namespace simnccl
