#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/stack_tree.h"

using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::stackmerge::frameLabel;
using hangwatch::stackmerge::StackTree;

namespace {

// Frames given outermost first (easier to read), stored innermost first as in the dumps.
ThreadStack treeThread(const std::string& name, std::vector<std::string> outermost_first) {
  ThreadStack t;
  t.name = name;
  for (auto it = outermost_first.rbegin(); it != outermost_first.rend(); ++it) {
    StackFrame f;
    f.function = *it;
    t.frames.push_back(f);
  }
  return t;
}

const StackTree::Node* child(const StackTree& tree, const StackTree::Node& parent, std::string_view label) {
  for (uint32_t c : parent.children)
    if (tree.nodes()[c].label == label) return &tree.nodes()[c];
  return nullptr;
}

std::map<std::string, int> foldedLines(const std::string& folded) {
  std::map<std::string, int> out;
  std::istringstream in(folded);
  std::string line;
  while (std::getline(in, line)) {
    const auto space = line.rfind(' ');
    out[line.substr(0, space)] += std::stoi(line.substr(space + 1));
  }
  return out;
}

}  // namespace

TEST_CASE("FrameLabelAddsFileAndLineForPythonFramesOnly") {
  StackFrame py;
  py.kind = FrameKind::kPython;
  py.function = "step";
  py.file = "train.py";
  py.line = 42;
  CHECK(frameLabel(py) == "step (train.py:42)");
  StackFrame native;
  native.function = "ncclAllReduce";
  native.file = "enqueue.cc";
  native.line = 10;
  CHECK(frameLabel(native) == "ncclAllReduce");
  StackFrame unknown;
  unknown.function = "??";
  unknown.module = "/usr/lib/libfoo.so.1";
  CHECK(frameLabel(unknown) == "?? [libfoo.so.1]");
}

TEST_CASE("StackTreeSharedPrefixesShareNodesWithTheirRankSets") {
  StackTree tree;
  for (int r = 0; r < 8; ++r) {
    tree.addThread(r, treeThread("main", {"main", "train", r == 5 ? "busy_loop" : "ncclAllReduce"}));
    tree.addThread(r, treeThread("helper", {"start_thread", "poll"}));
  }
  const auto& root = tree.nodes()[0];
  CHECK(root.label.empty());
  CHECK(root.threads == 16);
  CHECK(root.ranks.toString() == "0-7");
  const auto* main_node = child(tree, root, "main");
  REQUIRE(main_node);
  const auto* train = child(tree, *main_node, "train");
  REQUIRE(train);
  CHECK(train->threads == 8);
  const auto* allreduce = child(tree, *train, "ncclAllReduce");
  const auto* busy = child(tree, *train, "busy_loop");
  REQUIRE(allreduce);
  REQUIRE(busy);
  CHECK(allreduce->ranks.toString() == "0-4,6-7");
  CHECK(busy->ranks.toString() == "5");
  CHECK(tree.nodes().size() == 1 + 3 + 1 + 2);
}

TEST_CASE("StackTreeInternsEachDistinctLabelOnce") {
  StackTree tree;
  for (int r = 0; r < 4; ++r) tree.addThread(r, treeThread("t", {"a", std::string("b") + std::to_string(r % 2)}));
  const auto& root = tree.nodes()[0];
  REQUIRE(root.children.size() == 1);
  const auto& a = tree.nodes()[root.children[0]];
  REQUIRE(a.children.size() == 2);
  tree.addThread(9, treeThread("t", {"x", "a"}));
  const auto& x = tree.nodes()[tree.nodes()[0].children[1]];
  const auto& a_under_x = tree.nodes()[x.children[0]];
  CHECK(a_under_x.label.data() == tree.nodes()[tree.nodes()[0].children[0]].label.data());
}

TEST_CASE("StackTreeFoldedCountsThreadsEndingAtEachPath") {
  StackTree tree;
  tree.addThread(0, treeThread("m", {"main", "f", "g"}));
  tree.addThread(1, treeThread("m", {"main", "f", "g"}));
  tree.addThread(1, treeThread("w", {"main", "f"}));
  tree.addThread(2, treeThread("m", {"main", "h"}));
  const auto lines = foldedLines(tree.folded());
  CHECK(lines == std::map<std::string, int>{{"main;f;g", 2}, {"main;f", 1}, {"main;h", 1}});
}

TEST_CASE("StackTreeFoldedSumsToTheThreadCount") {
  StackTree tree;
  int added = 0;
  for (int r = 0; r < 50; ++r)
    for (int t = 0; t < r % 4 + 1; ++t) {
      tree.addThread(r, treeThread("t", {"main", "loop" + std::to_string(t), "wait" + std::to_string((r + t) % 3)}));
      ++added;
    }
  int total = 0;
  for (const auto& [path, n] : foldedLines(tree.folded())) total += n;
  CHECK(total == added);
  CHECK(tree.nodes()[0].threads == static_cast<uint32_t>(added));
}

TEST_CASE("StackTreeThreadWithNoFramesCountsOnlyAtTheRoot") {
  StackTree tree;
  tree.addThread(3, ThreadStack{});
  CHECK(tree.nodes().size() == 1);
  CHECK(tree.nodes()[0].threads == 1);
  CHECK(tree.nodes()[0].ranks.toString() == "3");
  CHECK(tree.folded().empty());
}

TEST_CASE("StackTreeDotLabelsEdgesWithRankSetsAndEscapesQuotes") {
  StackTree tree;
  for (int r = 0; r < 4; ++r) tree.addThread(r, treeThread("m", {"main", r == 2 ? "say \"hi\"" : "wait"}));
  const std::string dot = tree.dot();
  CHECK(dot.rfind("digraph", 0) == 0);
  CHECK(dot.find("label=\"0-1,3\\n3 threads\"") != std::string::npos);
  CHECK(dot.find("say \\\"hi\\\"") != std::string::npos);
  CHECK(dot.find("omitted") == std::string::npos);
}

TEST_CASE("StackTreeDotStopsAtMaxNodesAndSaysHowManyAreLeft") {
  StackTree tree;
  for (int r = 0; r < 20; ++r) tree.addThread(r, treeThread("m", {"main", "f" + std::to_string(r)}));
  const std::string dot = tree.dot(5);
  CHECK(dot.find("17 more nodes not shown") != std::string::npos);
}

TEST_CASE("StackTreeStaysValidAfterBeingMoved") {
  StackTree tree;
  tree.addThread(0, treeThread("m", {"main", "f"}));
  StackTree moved = std::move(tree);
  moved.addThread(1, treeThread("m", {"main", "f"}));
  CHECK(moved.nodes().size() == 3);
  CHECK(moved.nodes()[1].label == "main");
  CHECK(moved.nodes()[2].ranks.toString() == "0-1");
}

TEST_CASE("StackTreeWideFanoutFindsEveryChildAgain") {
  // Past a few children a node's lookups switch to a hash map; both paths must agree.
  StackTree tree;
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 40; ++k) tree.addThread(k, treeThread("t", {"main", "f" + std::to_string(k), "leaf"}));
  const auto* main_node = child(tree, tree.nodes()[0], "main");
  REQUIRE(main_node);
  CHECK(main_node->children.size() == 40);
  CHECK(main_node->threads == 80);
  for (int k = 0; k < 40; ++k) {
    const auto* f = child(tree, *main_node, "f" + std::to_string(k));
    REQUIRE(f);
    CHECK(f->threads == 2);
    CHECK(f->ranks.toString() == std::to_string(k));
  }
  CHECK(tree.nodes().size() == 1 + 1 + 40 + 40);
}

TEST_CASE("StackTreeAddPathNamesTheStackByItsInnermostNode") {
  StackTree tree;
  const uint32_t a = tree.addPath(0, treeThread("m", {"main", "f", "g"}));
  const uint32_t b = tree.addPath(1, treeThread("m", {"main", "f", "g"}));
  const uint32_t c = tree.addPath(1, treeThread("m", {"main", "f"}));
  CHECK(a == b);
  CHECK(c != a);
  CHECK(tree.stackOf(a) == std::vector<std::string>{"g", "f", "main"});
  CHECK(tree.addPath(2, ThreadStack{}) == 0);
  CHECK(tree.stackOf(0).empty());
}

TEST_CASE("StackTreeFoldedKeepsOneRecordPerLineWhateverTheLabels") {
  StackTree tree;
  tree.addThread(0, treeThread("m", {"main", "odd;name\nhere"}));
  CHECK(tree.folded() == "main;odd,name,here 1\n");
}
