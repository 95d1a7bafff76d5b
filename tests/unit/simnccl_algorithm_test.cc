// Which algorithm a collective runs (NCCL_ALGO, parsed as src/graph/tuning.cc parseList does)
// and the tree's shape (src/graph/trees.cc ncclGetBtree/ncclGetDtree, src/graph/connect.cc).
#include <catch2/catch.hpp>

#include "hangwatch/simgpu/nccl/algorithm.h"

using namespace simnccl;

namespace {

NodeTopology nodesOf(std::vector<int> node_of_rank) {
  std::vector<std::string> keys;
  for (int n : node_of_rank) keys.push_back("node" + std::to_string(n));
  return NodeTopology(keys);
}

constexpr size_t kMiB = 1 << 20;

Algo chosen(const std::string& spec, OpKind kind, size_t nbytes = 4 * kMiB, CommShape shape = {8, 1}) {
  auto t = AlgoTable::parse(spec);
  REQUIRE(t.ok());
  auto a = t->choose(kind, nbytes, shape);
  REQUIRE(a.ok());
  return *a;
}

}  // namespace

TEST_CASE("NcclAlgoLimitsTheChoiceToTheAlgorithmsItNames") {
  // One node of 8: the ring is the faster of the two for a 4 MiB AllReduce.
  CHECK(chosen("", OpKind::AllReduce) == Algo::kRing);
  CHECK(chosen("Tree,Ring", OpKind::AllReduce) == Algo::kRing);
  CHECK(chosen("tree", OpKind::AllReduce) == Algo::kTree);
  CHECK(chosen("^Ring", OpKind::AllReduce) == Algo::kTree);
  CHECK(chosen("allreduce:tree", OpKind::AllReduce) == Algo::kTree);
  CHECK(chosen("allreduce:tree", OpKind::AllGather) == Algo::kRing);
  CHECK(chosen("ring;allreduce:TREE", OpKind::AllReduce) == Algo::kTree);
  CHECK(chosen("tree", OpKind::Send) == Algo::kRing);  // point-to-point has no algorithm
  CHECK(std::string(algoName(Algo::kTree)) == "TREE");
  CHECK(std::string(algoName(Algo::kRing)) == "RING");
  CHECK(std::string(algoName(Algo::kPat)) == "PAT");
}

// NCCL's cost model (src/graph/tuning.cc ncclTopoTuneModel, ncclTopoGetAlgoTime): a tree's
// latency grows with log2(nodes), a ring's with the number of ranks, so small multi-node
// AllReduces take the tree and large ones the ring; PAT's latency is log2(nodes) too.
TEST_CASE("UnsetNcclAlgoTakesWhatNcclsCostModelFindsFastestForTheShape") {
  const CommShape two_nodes{8, 2}, sixteen_nodes{128, 16}, one_per_node{8, 8};
  CHECK(chosen("", OpKind::AllReduce, 64 * 1024, two_nodes) == Algo::kTree);
  CHECK(chosen("", OpKind::AllReduce, 4 * kMiB, two_nodes) == Algo::kTree);
  CHECK(chosen("", OpKind::AllReduce, 1024 * kMiB, two_nodes) == Algo::kRing);
  CHECK(chosen("", OpKind::AllReduce, 64 * 1024, sixteen_nodes) == Algo::kTree);
  CHECK(chosen("", OpKind::AllReduce, 64 * 1024, {8, 1}) == Algo::kRing);  // inside one node a tree is a chain
  CHECK(chosen("", OpKind::AllGather, 64 * 1024, one_per_node) == Algo::kPat);
  CHECK(chosen("", OpKind::ReduceScatter, 64 * 1024, one_per_node) == Algo::kPat);
  CHECK(chosen("", OpKind::AllGather, 1024 * kMiB, one_per_node) == Algo::kRing);
  CHECK(chosen("", OpKind::AllGather, 64 * 1024, two_nodes) == Algo::kRing);  // PAT: one rank per node only
  CHECK(chosen("", OpKind::Broadcast, 64 * 1024, two_nodes) == Algo::kRing);
  CHECK(chosen("ring", OpKind::AllReduce, 64 * 1024, two_nodes) == Algo::kRing);
  CHECK(chosen("allgather:pat", OpKind::AllGather, 1024 * kMiB, one_per_node) == Algo::kPat);
  // The model's figures: a 2-node tree beats the ring by its shorter latency.
  CHECK(modeledMicros(OpKind::AllReduce, Algo::kTree, 0, two_nodes) ==
        Approx(8.4 + 2 * (3 * 4.0 + 1 * 14.0)));
  CHECK(modeledMicros(OpKind::AllReduce, Algo::kRing, 0, two_nodes) == Approx(8.4 + 12 * 3.4 + 2 * 14.0));
  CHECK(modeledMicros(OpKind::AllGather, Algo::kPat, 0, one_per_node) == Approx(8.0 + 3 * 4.0 + 8 * 2.8));
  CHECK(modeledMicros(OpKind::AllGather, Algo::kTree, 0, one_per_node) < 0);
  CHECK(modeledMicros(OpKind::AllGather, Algo::kPat, 0, two_nodes) < 0);
}

TEST_CASE("PatIsLeftOutWhereNcclLeavesItOut") {
  const CommShape one_per_node{8, 8};
  auto off = AlgoTable::parse("", /*pat_enable=*/false);
  REQUIRE(off.ok());
  CHECK(*off->choose(OpKind::AllGather, 64 * 1024, one_per_node) == Algo::kRing);
  auto any = AlgoTable::parse("");
  REQUIRE(any.ok());
  // src/enqueue.cc: PAT's ReduceScatter does not scale (ncclAvg, PreMulSum).
  CHECK(*any->choose(OpKind::ReduceScatter, 64 * 1024, one_per_node, /*scaled=*/true) == Algo::kRing);
  auto pat = AlgoTable::parse("pat");
  REQUIRE(pat.ok());
  CHECK_FALSE(pat->choose(OpKind::AllGather, 64 * 1024, CommShape{8, 2}).ok());
  CHECK_FALSE(pat->choose(OpKind::ReduceScatter, 64 * 1024, one_per_node, true).ok());
  CHECK(patDimensions(1) == 0);
  CHECK(patDimensions(2) == 1);
  CHECK(patDimensions(5) == 3);
  CHECK(patDimensions(8) == 3);
}

TEST_CASE("ACollectiveNoAllowedAlgorithmCanRunIsRefusedAsNcclRefusesIt") {
  auto t = AlgoTable::parse("Tree");
  REQUIRE(t.ok());
  auto a = t->choose(OpKind::AllGather, 4 * kMiB, CommShape{8, 1});
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.error(), Catch::Contains("No algorithm/protocol available for function AllGather"));
  CHECK_THAT(a.error(), Catch::Contains("NCCL_ALGO was set to Tree"));
  auto pat = AlgoTable::parse("PAT");
  REQUIRE(pat.ok());
  CHECK_FALSE(pat->choose(OpKind::AllReduce, 4 * kMiB, CommShape{8, 8}).ok());
}

TEST_CASE("MalformedNcclAlgoIsAnError") {
  for (const char* bad : {"Trie", "allreduce:tree;ring", "allreduce:tree,foo", "gather:ring"}) {
    INFO(bad);
    auto t = AlgoTable::parse(bad);
    REQUIRE_FALSE(t.ok());
    CHECK_THAT(t.error(), Catch::Contains(std::string("NCCL_ALGO=") + bad));
  }
}

TEST_CASE("TheBinaryTreesAreNcclsOverFourteenAndTwelveNodes") {
  // The illustration in src/graph/trees.cc: 0 -> 8 -> {4, 12}, 4 -> {2, 6}, 2 -> {1, 3}, 12 -> {10, 13}.
  int up, d0, d1;
  doubleBinaryTree(14, 0, 0, up, d0, d1);
  CHECK((up == -1 && d0 == -1 && d1 == 8));
  doubleBinaryTree(14, 8, 0, up, d0, d1);
  CHECK((up == 0 && d0 == 4 && d1 == 12));
  doubleBinaryTree(14, 12, 0, up, d0, d1);
  CHECK((up == 8 && d0 == 10 && d1 == 13));
  doubleBinaryTree(14, 13, 0, up, d0, d1);
  CHECK((up == 12 && d0 == -1 && d1 == -1));
  // Mirrored for an even count (12): 3 -> 11 at the root's side, 11 -> 7 -> {5, 9}, 1 -> {0, 2}.
  doubleBinaryTree(12, 11, 1, up, d0, d1);
  CHECK((up == -1 && d0 == -1 && d1 == 3));
  doubleBinaryTree(12, 3, 1, up, d0, d1);
  CHECK((up == 11 && d0 == 7 && d1 == 1));
  doubleBinaryTree(12, 1, 1, up, d0, d1);
  CHECK((up == 3 && d0 == 2 && d1 == 0));
  // Shifted by one for an odd count (13): the second tree's root is 1.
  doubleBinaryTree(13, 1, 1, up, d0, d1);
  CHECK((up == -1 && d1 == 9));
}

TEST_CASE("TreeLinksChainTheRanksOfANodeAndJoinNodesAtTheirFirstRank") {
  // Two nodes of four: node 0 = ranks 0-3, node 1 = ranks 4-7.
  const NodeTopology nodes = nodesOf({0, 0, 0, 0, 1, 1, 1, 1});
  // Channel 0 of 2 runs tree 0 (node 0 the root), channel 1 tree 1 (node 1 the root).
  TreeLinks head0 = treeLinks(nodes, 8, 0, 0, 2);
  CHECK(head0.up == -1);
  CHECK(head0.down == std::vector<int>{1, 4});
  TreeLinks mid = treeLinks(nodes, 8, 2, 0, 2);
  CHECK(mid.up == 1);
  CHECK(mid.down == std::vector<int>{3});
  TreeLinks last = treeLinks(nodes, 8, 7, 0, 2);
  CHECK(last.up == 6);
  CHECK(last.down.empty());
  TreeLinks head1 = treeLinks(nodes, 8, 4, 0, 2);
  CHECK(head1.up == 0);
  CHECK(head1.down == std::vector<int>{5});
  TreeLinks head1_t1 = treeLinks(nodes, 8, 4, 1, 2);
  CHECK(head1_t1.up == -1);
  CHECK(head1_t1.down == std::vector<int>{5, 0});
  CHECK(treeLinks(nodes, 8, 0, 1, 2).up == 4);
  // One node: a chain, the same on every channel.
  const NodeTopology one = nodesOf({0, 0, 0});
  CHECK(treeLinks(one, 3, 0, 1, 2).down == std::vector<int>{1});
  CHECK(treeLinks(one, 3, 2, 1, 2).up == 1);
}
