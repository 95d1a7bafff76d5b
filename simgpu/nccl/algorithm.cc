#include "hangwatch/simgpu/nccl/algorithm.h"

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

namespace simnccl {
namespace {

const char* const kFunctionNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
const char* const kAlgoNames[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr int kTreeIndex = 0;
constexpr int kRingIndex = 1;
constexpr int kPatIndex = 6;

// src/graph/tuning.cc ncclTunerConstantsDefaults, SIMPLE protocol (microseconds).
constexpr double kBaseLatency[] = {8.4, 8.4, 8.0};    // Tree, Ring, PAT
constexpr double kNvlinkLatency[] = {4.0, 3.4, 4.0};  // hwLatencies[NCCL_HW_NVLINK]
constexpr double kNetLatency = 14.0;                 // hwLatencies[NCCL_HW_NET]: Tree, Ring and PAT alike
constexpr double kNetOverhead = 1.0;                 // getNetOverhead, x86 Intel
constexpr double kPerChannelMaxTreeBw[] = {38.7, 41.4, 36.0};  // perChMaxTreeBws, Hopper (N1/N2/N4)
// treeCorrectionFactor[NCCL_PROTO_SIMPLE], by log2(nBytes / 64).
constexpr double kTreeCorrection[] = {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
                                      .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9};
// What the topology search finds on H100 nodes (assumed, see algorithm.h).
constexpr int kChannels = 16;
constexpr double kBusBwOneNode = 360.0;
constexpr double kBusBwAcrossNodes = 190.0;

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

int log2i(size_t n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

int algoIndex(Algo algo) { return algo == Algo::kTree ? kTreeIndex : algo == Algo::kPat ? kPatIndex : kRingIndex; }

}  // namespace

const char* algoName(Algo algo) {
  switch (algo) {
    case Algo::kTree: return "TREE";
    case Algo::kPat: return "PAT";
    default: return "RING";
  }
}

int patDimensions(int nranks) {
  int d = 0;
  while ((1 << d) < nranks) ++d;
  return d;
}

double modeledMicros(OpKind kind, Algo algo, size_t nbytes, const CommShape& shape) {
  const int n = shape.nranks;
  const int nodes = std::max(1, shape.nnodes);
  const bool allreduce = kind == OpKind::AllReduce;
  if (!allreduce && kind != OpKind::AllGather && kind != OpKind::ReduceScatter) return -1;
  if (algo == Algo::kTree && !allreduce) return -1;
  if (algo == Algo::kPat && (allreduce || nodes != n)) return -1;
  const double ppn = static_cast<double>(n) / nodes;
  const int nsteps = allreduce ? 2 * (n - 1) : n - 1;
  const int a = algo == Algo::kTree ? 0 : algo == Algo::kRing ? 1 : 2;
  double bus = nodes == 1 ? kBusBwOneNode : kBusBwAcrossNodes;
  double lat = kBaseLatency[a];
  const double inter = kNetLatency;  // ppn 1 takes the tree's, the same for SIMPLE
  if (algo == Algo::kRing) {
    const double intra = std::max(kNvlinkLatency[1], nodes > 1 ? 3 * kNetOverhead : 0.0);
    const int inter_steps = nodes == 1 ? 0 : allreduce ? 2 * (nodes - 1) : nodes - 1;
    lat += (nsteps - inter_steps) * intra + inter_steps * inter;
    if (nodes > 1 && allreduce && nbytes / (kChannels * static_cast<size_t>(n)) >= 64) lat *= 1.4;  // plateau
    bus *= allreduce ? static_cast<double>(n) / nsteps : static_cast<double>(n) / (n - 1);
  } else if (algo == Algo::kTree) {
    lat += 2 * ((ppn - 1) * kNvlinkLatency[0] + log2i(static_cast<size_t>(nodes)) * inter);
    bus = std::min(bus * .92, kChannels * kPerChannelMaxTreeBw[nodes <= 2 ? nodes - 1 : 2]) * .5;
    const int log_size = log2i(nbytes >> 6);
    if ((nbytes >> 6) > 0 && log_size < 23) bus *= kTreeCorrection[log_size];
  } else {
    lat += log2i(static_cast<size_t>(nodes)) * (inter / 3.5) + n * 2.8;
    bus *= .75;
  }
  return lat + static_cast<double>(nbytes) / (1000.0 * bus);
}

hangwatch::Expected<AlgoTable> AlgoTable::fromEnvironment() {
  const char* spec = std::getenv("NCCL_ALGO");
  const char* pat = std::getenv("NCCL_PAT_ENABLE");
  // NCCL_PARAM: an empty value is the default (2: PAT where it applies); 0 turns it off.
  return parse(spec != nullptr ? spec : "", pat == nullptr || *pat == '\0' || std::atoi(pat) != 0);
}

hangwatch::Expected<AlgoTable> AlgoTable::parse(const std::string& spec, bool pat_enable) {
  AlgoTable t;
  t.spec_ = spec;
  t.pat_enable_ = pat_enable;
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

hangwatch::Expected<Algo> AlgoTable::choose(OpKind kind, size_t nbytes, const CommShape& shape, bool scaled) const {
  const int f = functionIndex(kind);
  if (f < 0) return Algo::kRing;  // point-to-point has no algorithm
  if (shape.nranks <= 1) return Algo::kRing;  // one rank copies; NCCL does not tune it
  std::vector<Algo> candidates{Algo::kRing};
  if (kind == OpKind::AllReduce) candidates.push_back(Algo::kTree);
  if ((kind == OpKind::AllGather || (kind == OpKind::ReduceScatter && !scaled)) && pat_enable_ &&
      shape.nnodes == shape.nranks)
    candidates.push_back(Algo::kPat);
  std::optional<Algo> best;
  double best_time = 0;
  for (Algo a : candidates) {
    if (!enabled_[f][algoIndex(a)]) continue;
    const double t = kind == OpKind::Broadcast || kind == OpKind::Reduce ? 0 : modeledMicros(kind, a, nbytes, shape);
    if (t < 0) continue;
    if (!best || t < best_time) best = a, best_time = t;
  }
  if (best) return *best;
  return hangwatch::Error{fmt::format("No algorithm/protocol available for function {}. NCCL_ALGO was set to {} "
                                      "(simnccl runs Ring, Tree for AllReduce, and PAT for AllGather and "
                                      "ReduceScatter with one rank per node)",
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
