#include "hangwatch/stackmerge/stack_tree.h"

#include <algorithm>

#include <fmt/format.h>

namespace hangwatch::stackmerge {
namespace {

// Past this many children a node's lookups go through the hash map.
constexpr size_t kScanLimit = 8;

uint64_t wideKey(uint32_t parent, uint32_t label_id) { return (uint64_t{parent} << 32) | label_id; }

// Most native frames are labelled by their function name alone: no copy needed.
std::string_view labelOf(const StackFrame& f, std::string& scratch) {
  if (f.kind == FrameKind::kNative && !f.function.empty() && f.function != "??") return f.function;
  scratch.clear();
  appendFrameLabel(f, scratch);
  return scratch;
}

}  // namespace

StackTree::StackTree() : labels_(std::make_unique<LabelInterner>()) {
  nodes_.emplace_back();
  label_ids_.push_back(labels_->intern(""));
}

uint32_t StackTree::childFor(uint32_t parent, std::string_view label) {
  std::vector<uint32_t>& children = nodes_[parent].children;
  uint32_t label_id = UINT32_MAX;
  if (children.size() <= kScanLimit) {
    for (uint32_t child : children)
      if (nodes_[child].label == label) return child;
  } else {
    label_id = labels_->intern(label);
    if (auto it = wide_children_.find(wideKey(parent, label_id)); it != wide_children_.end()) return it->second;
  }
  if (label_id == UINT32_MAX) label_id = labels_->intern(label);
  const auto index = static_cast<uint32_t>(nodes_.size());
  Node& node = nodes_.emplace_back();
  node.label = labels_->label(label_id);
  node.parent = parent;
  label_ids_.push_back(label_id);
  std::vector<uint32_t>& siblings = nodes_[parent].children;  // nodes_ may have moved
  siblings.push_back(index);
  if (siblings.size() == kScanLimit + 1) {
    for (uint32_t c : siblings) wide_children_.emplace(wideKey(parent, label_ids_[c]), c);
  } else if (siblings.size() > kScanLimit + 1) {
    wide_children_.emplace(wideKey(parent, label_id), index);
  }
  return index;
}

uint32_t StackTree::addPath(int rank, const ThreadStack& thread) {
  uint32_t node = 0;
  nodes_[0].ranks.insert(rank);
  ++nodes_[0].threads;
  for (auto it = thread.frames.rbegin(); it != thread.frames.rend(); ++it) {
    node = childFor(node, labelOf(*it, scratch_));
    Node& n = nodes_[node];
    n.ranks.insert(rank);
    ++n.threads;
  }
  return node;
}

uint32_t StackTree::addPath(int rank, std::span<const TableFrame> frames) {
  uint32_t node = 0;
  nodes_[0].ranks.insert(rank);
  ++nodes_[0].threads;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    node = childFor(node, it->label);
    Node& n = nodes_[node];
    n.ranks.insert(rank);
    ++n.threads;
  }
  return node;
}

void StackTree::addThreadAt(int rank, uint32_t node) {
  for (;; node = nodes_[node].parent) {
    Node& n = nodes_[node];
    n.ranks.insert(rank);
    ++n.threads;
    if (node == 0) return;
  }
}

void StackTree::addThread(int rank, const ThreadStack& thread) { addPath(rank, thread); }

const std::vector<StackTree::Node>& StackTree::nodes() const { return nodes_; }

std::vector<std::string> StackTree::stackOf(uint32_t node) const {
  std::vector<std::string> out;
  for (; node != 0; node = nodes_[node].parent) out.emplace_back(nodes_[node].label);
  return out;
}

std::string StackTree::folded() const {
  std::string out;
  std::string path;
  // Iterative DFS; each entry remembers how long `path` was before its label was added.
  struct Visit {
    uint32_t node;
    size_t path_len;
  };
  std::vector<Visit> stack;
  for (auto it = nodes_[0].children.rbegin(); it != nodes_[0].children.rend(); ++it) stack.push_back({*it, 0});
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    const Node& n = nodes_[v.node];
    path.resize(v.path_len);
    if (!path.empty()) path += ';';
    // ';' separates frames and a newline ends the record in the folded format.
    for (char c : n.label) path += (c == ';' || c == '\n') ? ',' : c;
    uint32_t through_children = 0;
    for (uint32_t c : n.children) through_children += nodes_[c].threads;
    if (n.threads > through_children) {
      fmt::format_to(std::back_inserter(out), "{} {}\n", path, n.threads - through_children);
    }
    const size_t len = path.size();
    for (auto it = n.children.rbegin(); it != n.children.rend(); ++it) stack.push_back({*it, len});
  }
  return out;
}

namespace {

std::string dotEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Scattered rank sets can be long; an edge label only needs to say which ranks, roughly.
std::string edgeRanks(const RankSet& ranks) {
  constexpr size_t kMaxChars = 48;
  std::string s = ranks.toString();
  if (s.size() <= kMaxChars) return s;
  const auto cut = s.rfind(',', kMaxChars);
  s.resize(cut == std::string::npos ? kMaxChars : cut);
  return fmt::format("{},... ({} ranks)", s, ranks.size());
}

}  // namespace

std::string StackTree::dot(size_t max_nodes) const {
  std::string out = "digraph stacks {\n  node [shape=box, fontname=\"monospace\"];\n";
  auto to = std::back_inserter(out);
  fmt::format_to(to, "  n0 [label=\"{} ranks, {} threads\"];\n", nodes_[0].ranks.size(), nodes_[0].threads);
  // Breadth first, busiest children first, so a cut keeps the paths most threads share.
  std::vector<uint32_t> queue{0};
  size_t shown = 1;
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    const Node& parent = nodes_[queue[qi]];
    std::vector<uint32_t> children = parent.children;
    std::stable_sort(children.begin(), children.end(),
                     [&](uint32_t a, uint32_t b) { return nodes_[a].threads > nodes_[b].threads; });
    for (uint32_t c : children) {
      if (shown >= max_nodes) break;
      ++shown;
      queue.push_back(c);
      const Node& n = nodes_[c];
      fmt::format_to(to, "  n{} [label=\"{}\"];\n", c, dotEscape(n.label));
      fmt::format_to(to, "  n{} -> n{} [label=\"{}\\n{} threads\"];\n", queue[qi], c, dotEscape(edgeRanks(n.ranks)),
                     n.threads);
    }
  }
  if (const size_t omitted = nodes_.size() - shown; omitted > 0)
    fmt::format_to(to, "  omitted [shape=plaintext, label=\"{} more nodes not shown\"];\n", omitted);
  out += "}\n";
  return out;
}

}  // namespace hangwatch::stackmerge
