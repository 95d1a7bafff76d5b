#pragma once
// Groups ranks whose stacks are identical, so a report shows a handful of classes and
// the odd rank out instead of thousands of stacks.
#include <cstdint>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/label_interner.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/stackmerge/stack_table.h"
#include "hangwatch/stackmerge/stack_tree.h"

namespace hangwatch::stackmerge {

struct StackClass {
  RankSet ranks;
  // Representative (the class's lowest rank): each thread's labels, innermost first. Only
  // the threads that decided the class; every thread when none differs across ranks.
  std::vector<std::vector<std::string>> thread_stacks;
  std::vector<std::string> thread_names;  // parallel to thread_stacks
};

// Ranks with identical stacks. A rank's signature is the sorted multiset of its threads'
// label sequences, after dropping threads whose stack is identical on every rank that has
// them (idle helpers: the equivalence is decided by what differs). Threads are matched
// across ranks by name. Largest class first.
class StackClassifier {
 public:
  void addRank(int rank, const std::vector<ThreadStack>& threads);
  // The same for threads whose stacks are ids in `table`; every call must pass the same table.
  void addRank(int rank, const std::vector<RankThread>& threads, const StackTable& table);
  std::vector<StackClass> classes() const;
  // Ranks in classes whose size is small relative to the largest (the odd ones out):
  // at most a third of it. Two equal halves have no odd one out.
  std::vector<StackClass> outliers() const;
  // Every thread added so far, merged: the same tree StackTree::addThread would build, so a
  // report needs to walk the stacks only once.
  const StackTree& tree() const { return tree_; }

 private:
  struct ThreadEntry {
    uint32_t name;
    uint32_t stack;
  };
  struct RankEntry {
    int rank = 0;
    std::vector<ThreadEntry> threads;  // in dump order
  };
  // A stack is identified by the tree node its innermost frame ends at.
  StackTree tree_;
  LabelInterner names_;
  std::vector<RankEntry> ranks_;
  std::vector<uint32_t> node_of_table_stack_;  // tree node per StackTable id; UINT32_MAX unseen
};

}  // namespace hangwatch::stackmerge
