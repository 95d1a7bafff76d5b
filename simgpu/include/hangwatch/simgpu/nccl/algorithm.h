#pragma once
// Which algorithm a collective runs, and the tree's shape.
//
// NCCL_ALGO is parsed as NCCL parses it (src/graph/tuning.cc parseList): `;`-separated
// entries, all but the first with a function prefix (`allreduce:tree;allgather:ring`), each a
// `,`-list of algorithm names (src/init.cc ncclAlgoStr, strcasecmp) or, with a leading `^`,
// the names to leave out. An unknown name fails communicator init. simnccl runs Ring for
// every collective and Tree for AllReduce; when both are allowed it runs Ring (NCCL's cost
// model, which picks Tree for many multi-node AllReduce sizes, is not modelled). A collective
// none of whose allowed algorithms simnccl runs fails as NCCL's does ("No algorithm/protocol
// available", ncclInvalidUsage).
//
// The tree (src/graph/trees.cc ncclGetBtree/ncclGetDtree, src/graph/connect.cc
// ncclTopoPreset and connectTrees, pattern NCCL_TOPO_PATTERN_TREE): inside a node a chain
// in rank order; the node's first rank connects to the parent node's first rank and to the
// child nodes' first ranks along a double binary tree over the nodes. The first half of the
// channels runs the first tree, the second half the mirrored (or shifted) one.
#include <array>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/op.h"

namespace simnccl {

const char* algoName(Algo algo);  // as ncclAlgoToString: "RING", "TREE"

class AlgoTable {
 public:
  AlgoTable() {
    for (auto& f : enabled_) f.fill(true);
  }
  // From NCCL_ALGO (unset or empty: everything allowed).
  static hangwatch::Expected<AlgoTable> fromEnvironment();
  static hangwatch::Expected<AlgoTable> parse(const std::string& spec);

  // The algorithm `kind` runs with, or an error when none that simnccl has is allowed.
  hangwatch::Expected<Algo> choose(OpKind kind) const;

 private:
  static constexpr int kFunctions = 5;   // ncclFuncStr: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce
  static constexpr int kAlgorithms = 7;  // ncclAlgoStr: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
  std::array<std::array<bool, kAlgorithms>, kFunctions> enabled_;
  std::string spec_;
};

// One rank's place in one channel's tree: its parent (-1 at the root) and its children.
struct TreeLinks {
  int up = -1;
  std::vector<int> down;
};

// The tree of `channel` of `nchannels` for `rank` in `nodes`.
TreeLinks treeLinks(const NodeTopology& nodes, int nranks, int rank, int channel, int nchannels);

// NCCL's double binary tree over `n` items (nodes): parent and two children of `i` in tree
// `which` (0 or 1), -1 where there is none.
void doubleBinaryTree(int n, int i, int which, int& up, int& down0, int& down1);

}  // namespace simnccl
