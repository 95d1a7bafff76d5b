#pragma once
// STAT-style prefix tree of every thread's stack across ranks, rooted at the outermost
// frame: one node per distinct call path, carrying the ranks and thread count through it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hangwatch/stackmerge/frame_label.h"
#include "hangwatch/stackmerge/label_interner.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/common/stack_frame.h"
#include "hangwatch/stackmerge/stack_table.h"

namespace hangwatch::stackmerge {

class StackTree {
 public:
  struct Node {
    std::string_view label;          // interned; "" for the root
    RankSet ranks;                   // ranks with at least one thread through this node
    uint32_t threads = 0;            // threads through this node, all ranks
    std::vector<uint32_t> children;  // indices into nodes()
    uint32_t parent = 0;             // index of the caller's node; the root's is 0
  };

  StackTree();
  // frames innermost first, as in the dumps (ThreadStack::frames)
  void addThread(int rank, const ThreadStack& thread);
  // The same, returning the node of the innermost frame: equal stacks end at the same node,
  // so it identifies the stack (0, the root, for a thread without frames).
  uint32_t addPath(int rank, const ThreadStack& thread);
  // The same for a stack of a StackTable (frames innermost first, labels already made).
  uint32_t addPath(int rank, std::span<const TableFrame> frames);
  // One more thread of `rank` on the stack ending at `node`, which addPath returned before:
  // a stack seen on many ranks is matched by label once, then counted by walking up.
  void addThreadAt(int rank, uint32_t node);
  const std::vector<Node>& nodes() const;  // nodes()[0] is the root
  // Labels from `node` up to the root's child: the stack ending there, innermost first.
  std::vector<std::string> stackOf(uint32_t node) const;
  std::string folded() const;              // flamegraph input: "f1;f2;...;fn <threads>" per leaf path
  std::string dot(size_t max_nodes = 500) const;  // Graphviz, edges labelled with rank sets

 private:
  uint32_t childFor(uint32_t parent, std::string_view label);

  // Owned by pointer so the string_views in nodes_ survive a move of the tree.
  std::unique_ptr<LabelInterner> labels_;
  std::vector<Node> nodes_;
  // Children of nodes with many of them, by (parent, label id): most nodes have a few and
  // are searched by a scan that compares labels without hashing them.
  std::unordered_map<uint64_t, uint32_t> wide_children_;
  std::vector<uint32_t> label_ids_;  // parallel to nodes_
  std::string scratch_;
};

}  // namespace hangwatch::stackmerge

// The shared interface names one header for the tree and the classes.
#include "hangwatch/stackmerge/stack_classifier.h"
