#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/stack_tree.h"

using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::stackmerge::StackClass;
using hangwatch::stackmerge::StackClassifier;

namespace {

ThreadStack thread(const std::string& name, std::vector<std::string> outermost_first) {
  ThreadStack t;
  t.name = name;
  for (auto it = outermost_first.rbegin(); it != outermost_first.rend(); ++it) {
    StackFrame f;
    f.function = *it;
    t.frames.push_back(f);
  }
  return t;
}

// A rank as a hung ring leaves it: main in the collective, two idle channel threads.
std::vector<ThreadStack> rankStuckIn(const std::string& where) {
  return {thread("MainThread", {"main", "train_step", where}),
          thread("simnccl-ch0", {"start_thread", "channel_loop", "simnccl_wait_peer"}),
          thread("simnccl-ch1", {"start_thread", "channel_loop", "simnccl_wait_peer"})};
}

}  // namespace

TEST_CASE("StackClassifierSeparatesTheRankThatIsNotInTheCollective") {
  StackClassifier classifier;
  for (int r = 0; r < 8; ++r) classifier.addRank(r, rankStuckIn(r == 3 ? "host_loop" : "ncclAllReduce"));
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 2);
  CHECK(classes[0].ranks.toString() == "0-2,4-7");
  CHECK(classes[1].ranks.toString() == "3");
  // Only the thread that differs decides and represents the class.
  REQUIRE(classes[1].thread_names == std::vector<std::string>{"MainThread"});
  CHECK(classes[1].thread_stacks[0] == std::vector<std::string>{"host_loop", "train_step", "main"});
  const auto outliers = classifier.outliers();
  REQUIRE(outliers.size() == 1);
  CHECK(outliers[0].ranks.toString() == "3");
}

TEST_CASE("StackClassifierAllIdenticalRanksFormOneClassShowingEveryThread") {
  StackClassifier classifier;
  for (int r = 0; r < 4; ++r) classifier.addRank(r, rankStuckIn("ncclAllReduce"));
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 1);
  CHECK(classes[0].ranks.toString() == "0-3");
  CHECK(classes[0].thread_names == std::vector<std::string>{"MainThread", "simnccl-ch0", "simnccl-ch1"});
  CHECK(classifier.outliers().empty());
}

TEST_CASE("StackClassifierIgnoresThreadOrderWithinARank") {
  StackClassifier classifier;
  auto a = rankStuckIn("ncclAllReduce");
  a.push_back(thread("worker", {"start_thread", "queue_get"}));
  auto b = a;
  std::swap(b[0], b[3]);
  classifier.addRank(0, a);
  classifier.addRank(1, b);
  auto c = a;
  c[3] = thread("worker", {"start_thread", "compute"});
  classifier.addRank(2, c);
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 2);
  CHECK(classes[0].ranks.toString() == "0-1");
  CHECK(classes[1].ranks.toString() == "2");
}

TEST_CASE("StackClassifierKeepsCountsOfDuplicateThreadStacks") {
  // Two workers in the same place are not the same rank as one worker there.
  StackClassifier classifier;
  auto base = rankStuckIn("ncclAllReduce");
  auto two = base;
  two.push_back(thread("worker", {"start_thread", "queue_get"}));
  two.push_back(thread("worker", {"start_thread", "queue_get"}));
  auto one = base;
  one.push_back(thread("worker", {"start_thread", "queue_get"}));
  one.push_back(thread("worker", {"start_thread", "compute"}));
  auto other = one;
  other[4] = thread("worker", {"start_thread", "queue_get"});
  classifier.addRank(0, two);
  classifier.addRank(1, one);
  classifier.addRank(2, other);
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 2);
  CHECK(classes[0].ranks.toString() == "0,2");
  CHECK(classes[1].ranks.toString() == "1");
}

TEST_CASE("StackClassifierOrdersClassesLargestFirstAndRanksAscending") {
  StackClassifier classifier;
  // Ranks arrive in any order (dumps are read in parallel).
  for (int r : {9, 1, 5, 0, 7, 3, 2, 8, 4, 6}) classifier.addRank(r, rankStuckIn(r % 3 == 0 ? "a" : "b"));
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 2);
  CHECK(classes[0].ranks.toString() == "1-2,4-5,7-8");
  CHECK(classes[1].ranks.toString() == "0,3,6,9");
  // 4 of 6 is not small relative to the largest class.
  CHECK(classifier.outliers().empty());
}

TEST_CASE("StackClassifierTwoEqualHalvesHaveNoOddOneOut") {
  StackClassifier classifier;
  for (int r = 0; r < 4; ++r) classifier.addRank(r, rankStuckIn(r < 2 ? "a" : "b"));
  CHECK(classifier.classes().size() == 2);
  CHECK(classifier.outliers().empty());
}

TEST_CASE("StackClassifierRankWithoutThreadsIsItsOwnClass") {
  // Every rank that has the threads agrees on them; rank 4 (no stacks collected) differs
  // only by having none, and must not be reported as stuck where the others are.
  StackClassifier classifier;
  for (int r = 0; r < 6; ++r) classifier.addRank(r, r == 4 ? std::vector<ThreadStack>{} : rankStuckIn("x"));
  const auto classes = classifier.classes();
  REQUIRE(classes.size() == 2);
  CHECK(classes[0].ranks.toString() == "0-3,5");
  CHECK(classes[1].ranks.toString() == "4");
  CHECK(classes[1].thread_stacks.empty());
  REQUIRE(classifier.outliers().size() == 1);
}

TEST_CASE("StackClassifierTreeHoldsEveryThreadOfEveryRank") {
  StackClassifier classifier;
  for (int r = 0; r < 5; ++r) classifier.addRank(r, rankStuckIn(r == 1 ? "host_loop" : "ncclAllReduce"));
  const auto& tree = classifier.tree();
  CHECK(tree.nodes()[0].threads == 15);
  CHECK(tree.nodes()[0].ranks.toString() == "0-4");
  const std::string folded = tree.folded();
  CHECK(folded.find("main;train_step;host_loop 1\n") != std::string::npos);
  CHECK(folded.find("main;train_step;ncclAllReduce 4\n") != std::string::npos);
  CHECK(folded.find("start_thread;channel_loop;simnccl_wait_peer 10\n") != std::string::npos);
}
