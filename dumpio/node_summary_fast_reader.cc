#include "hangwatch/dumpio/node_summary_fast_reader.h"

#include <simdjson.h>

#include "hangwatch/dumpio/record_reader.h"

namespace hangwatch::dumpio {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kTree = schema::keyOf(&NodeSummary::tree);

Error summaryError(const std::string& why) { return Error{"node summary: " + why}; }

}  // namespace

Expected<NodeSummaryRead> nodeSummaryFromPaddedText(std::string_view text, const NodeSummaryReadOptions& options) {
  thread_local od::parser parser;
  od::document doc;
  od::object o;
  if (std::optional<std::string> e = openObject(parser, doc, text, o)) return summaryError(*e);
  RecordReader fields;
  NodeSummaryRead out;
  bool tree_seen = false;
  const bool ok = fields.record(o, out.summary, "node summary", [&](std::string_view k, od::value m) -> std::optional<bool> {
    if (!RecordReader::is(k, kTree)) return std::nullopt;
    tree_seen = true;
    // Left unread, simdjson skips the value.
    if (options.need_tree && !options.need_tree(out.summary)) return true;
    out.tree_read = true;
    return fields.value(m, out.summary.tree, "tree");
  });
  if (!ok) return summaryError(fields.error());
  if (!endsAfter(doc)) return summaryError("text after the summary");
  if (!tree_seen) out.tree_read = true;  // no tree: nothing skipped
  if (Expected<bool> checked = checkNodeSummary(out.summary, out.tree_read); !checked) return Error{checked.error()};
  return out;
}

}  // namespace hangwatch::dumpio
