#pragma once
// Which algorithm a collective runs, and the tree's shape.
//
// NCCL_ALGO is parsed as NCCL parses it (src/graph/tuning.cc parseList): `;`-separated
// entries, all but the first with a function prefix (`allreduce:tree;allgather:ring`), each a
// `,`-list of algorithm names (src/init.cc ncclAlgoStr, strcasecmp) or, with a leading `^`,
// the names to leave out. An unknown name fails communicator init. simnccl runs Ring for
// every collective, Tree for AllReduce and PAT for AllGather and ReduceScatter when every
// rank is alone on its node (src/graph/tuning.cc ncclPatEnable; NCCL_PAT_ENABLE=0 turns it
// off; not for a ReduceScatter that scales, ncclAvg or a PreMulSum, src/enqueue.cc). Among
// the allowed ones it takes the one NCCL's cost model (ncclTopoTuneModel, ncclTopoGetAlgoTime)
// finds fastest for the call's size and the communicator's shape, with the SIMPLE protocol's
// constants and the bandwidth of H100 nodes (modeledMicros). A collective none of whose
// allowed algorithms simnccl runs fails as NCCL's does ("No algorithm/protocol available",
// ncclInvalidUsage).
//
// The tree (src/graph/trees.cc ncclGetBtree/ncclGetDtree, src/graph/connect.cc
// ncclTopoPreset and connectTrees, pattern NCCL_TOPO_PATTERN_TREE): inside a node a chain
// in rank order; the node's first rank connects to the parent node's first rank and to the
// child nodes' first ranks along a double binary tree over the nodes. The first half of the
// channels runs the first tree, the second half the mirrored (or shifted) one.
//
// PAT (src/transport/generic.cc ncclTransportPatConnect, src/proxy.cc ncclPatternPatUp/Down):
// for each dimension i < log2Up(nranks), ReduceScatter sends to rank + 2^i and receives from
// rank - 2^i; AllGather sends to rank - 2^i and receives from rank + 2^i.
#include <array>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/simgpu/nccl/node_topology.h"
#include "hangwatch/simgpu/nccl/op.h"

namespace simnccl {

const char* algoName(Algo algo);  // as ncclAlgoToString: "RING", "TREE", "PAT"

// What the choice depends on besides the call.
struct CommShape {
  int nranks = 1;
  int nnodes = 1;
};

// NCCL's modeled time in microseconds of `kind` (AllReduce, AllGather, ReduceScatter) of
// `nbytes` (NCCL's nBytes: count x datatype size, x nranks for AllGather and ReduceScatter)
// with `algo` on `shape`, or a negative number where the algorithm does not apply. SIMPLE
// protocol; NCCL's latencies (tunerConstants) for Hopper; bus bandwidth of H100 nodes:
// 360 GB/s inside one node (NVLink), 190 GB/s across nodes (one 400 Gb/s NIC per GPU),
// 16 channels.
double modeledMicros(OpKind kind, Algo algo, size_t nbytes, const CommShape& shape);

class AlgoTable {
 public:
  AlgoTable() {
    for (auto& f : enabled_) f.fill(true);
  }
  // From NCCL_ALGO (unset or empty: everything allowed) and NCCL_PAT_ENABLE.
  static hangwatch::Expected<AlgoTable> fromEnvironment();
  static hangwatch::Expected<AlgoTable> parse(const std::string& spec, bool pat_enable = true);

  // The algorithm `kind` of `nbytes` runs with on `shape`, or an error when none that
  // simnccl has is allowed. `scaled`: a reduction that scales (ncclAvg, a PreMulSum).
  hangwatch::Expected<Algo> choose(OpKind kind, size_t nbytes, const CommShape& shape, bool scaled = false) const;

 private:
  static constexpr int kFunctions = 5;   // ncclFuncStr: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce
  static constexpr int kAlgorithms = 7;  // ncclAlgoStr: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
  std::array<std::array<bool, kAlgorithms>, kFunctions> enabled_;
  std::string spec_;
  bool pat_enable_ = true;
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

// PAT's dimensions: log2Up(nranks) (0 for one rank).
int patDimensions(int nranks);

}  // namespace simnccl
