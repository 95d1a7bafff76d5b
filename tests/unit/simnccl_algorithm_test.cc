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

Algo chosen(const std::string& spec, OpKind kind) {
  auto t = AlgoTable::parse(spec);
  REQUIRE(t.ok());
  auto a = t->choose(kind);
  REQUIRE(a.ok());
  return *a;
}

}  // namespace

TEST_CASE("NcclAlgoPicksTheTreeForAllReduceOnlyWhenTheRingIsLeftOut") {
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
}

TEST_CASE("ACollectiveNoAllowedAlgorithmCanRunIsRefusedAsNcclRefusesIt") {
  auto t = AlgoTable::parse("Tree");
  REQUIRE(t.ok());
  auto a = t->choose(OpKind::AllGather);
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.error(), Catch::Contains("No algorithm/protocol available for function AllGather"));
  CHECK_THAT(a.error(), Catch::Contains("NCCL_ALGO was set to Tree"));
  auto pat = AlgoTable::parse("PAT");
  REQUIRE(pat.ok());
  CHECK_FALSE(pat->choose(OpKind::AllReduce).ok());
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
