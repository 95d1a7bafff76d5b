#pragma once
// nodes/<host>.json read with simdjson On-Demand: the same NodeSummary as
// hangwatch::nodeSummaryFromText (both follow its field list), and the stack tree left unread
// when the caller already has every stack class the summary names.
#include <functional>
#include <string_view>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/node_summary.h"

namespace hangwatch::dumpio {

struct NodeSummaryReadOptions {
  // Called on reaching the tree, with what was read before it (the classes, in a summary
  // this project wrote): false skips the tree. Unset: the tree is read.
  std::function<bool(const NodeSummary&)> need_tree;
};

struct NodeSummaryRead {
  NodeSummary summary;
  bool tree_read = false;  // false: `summary.tree` is empty because it was skipped
};

// `text.data()` must have kFastReaderPadding readable bytes after `text.size()`. The summary
// passes checkNodeSummary, or it is an error.
Expected<NodeSummaryRead> nodeSummaryFromPaddedText(std::string_view text, const NodeSummaryReadOptions& options = {});

}  // namespace hangwatch::dumpio
