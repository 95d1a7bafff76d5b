#include "hangwatch/common/node_summary.h"

#include <algorithm>

#include <fmt/format.h>

#include "hangwatch/common/schema/json_codec.h"

namespace hangwatch {

// Two 64-bit FNV-1a variants over the same bytes (different offsets and primes): a collision
// would have to hit both, and a stack is never merged with one it is not.
void StackDigest::byte(unsigned char c) {
  a_ = (a_ ^ c) * 0x100000001b3ull;
  b_ = (b_ ^ c) * 0x00000100000001b3ull + 0x9e3779b97f4a7c15ull;
}

void StackDigest::add(FrameKind kind, std::string_view label) {
  byte(kind == FrameKind::kPython ? 'p' : 'n');
  const auto n = static_cast<uint32_t>(label.size());
  for (int i = 0; i < 4; ++i) byte(static_cast<unsigned char>(n >> (8 * i)));
  for (char c : label) byte(static_cast<unsigned char>(c));
}

std::string StackDigest::hex() const { return fmt::format("{:016x}{:016x}", a_, b_); }

nlohmann::json toJson(const NodeSummary& s) { return schema::toJson(s); }

Expected<bool> checkNodeSummary(const NodeSummary& s, bool tree_read) {
  auto ascending = [](const std::vector<int>& v) {
    return std::adjacent_find(v.begin(), v.end(), [](int a, int b) { return a >= b; }) == v.end() &&
           (v.empty() || v.front() >= 0);
  };
  if (!ascending(s.covers)) return Error{"node summary: covers is not a list of ascending ranks"};
  if (!ascending(s.lacks)) return Error{"node summary: lacks is not a list of ascending ranks"};
  if (s.ranks.size() != s.covers.size()) return Error{"node summary: ranks do not match covers"};
  if (s.files.size() != s.covers.size()) return Error{"node summary: files do not match covers"};
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    if (s.ranks[i].rank != s.covers[i])
      return Error{fmt::format("node summary: record {} is of rank {}, covers says {}", i, s.ranks[i].rank, s.covers[i])};
    for (const RankThread& t : s.ranks[i].threads)
      if (t.stack >= s.classes.size())
        return Error{fmt::format("node summary: a thread of rank {} names stack class {} of {}", s.ranks[i].rank,
                                 t.stack, s.classes.size())};
  }
  if (!tree_read) return true;
  for (size_t i = 0; i < s.tree.size(); ++i)
    if (s.tree[i].parent < -1 || s.tree[i].parent >= static_cast<int>(i))
      return Error{fmt::format("node summary: tree node {} has parent {}", i, s.tree[i].parent)};
  for (const NodeStackClass& c : s.classes)
    if (c.leaf < -1 || c.leaf >= static_cast<int>(s.tree.size()))
      return Error{fmt::format("node summary: stack class leaf {} is outside the tree ({} nodes)", c.leaf, s.tree.size())};
  return true;
}

Expected<NodeSummary> nodeSummaryFromText(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"node summary: truncated or corrupt JSON"};
  Expected<NodeSummary> s = schema::fromJson<NodeSummary>(j);
  if (!s) return s;
  if (Expected<bool> ok = checkNodeSummary(*s); !ok) return Error{ok.error()};
  return s;
}

}  // namespace hangwatch
