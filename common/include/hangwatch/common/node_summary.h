#pragma once
// nodes/<host>.json (DESIGN.md §4): one node's ranks merged, written on the node when its last
// collector finishes (or its deadline passes), so that `forensics report` opens one file per
// node instead of three per rank. It holds each covered rank's record (rank_record.h, what the
// report would have read from the rank's own files) and the node's distinct thread stacks once,
// as a prefix tree; the ranks it lacks are read from their own files.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/rank_record.h"
#include "hangwatch/common/schema/field_list.h"
#include "hangwatch/common/stack_frame.h"

namespace hangwatch {

// A frame of the node's stack tree: frames shared by several stacks' outer ends are stored
// once. `parent` is an earlier node's index, -1 for a root (a thread's outermost frame).
struct StackTreeNode {
  int parent = -1;
  FrameKind kind = FrameKind::kNative;
  std::string label;  // stackmerge's frameLabel() of the frame
};

// A distinct stack of the node: the path from tree node `leaf` (its innermost frame) up to a
// root. `key` is a digest of the frames (stackDigest), so that a reader that already has the
// stack skips the tree; `ranks` are the ranks with a thread on it, as ranges ("0-3,6").
struct NodeStackClass {
  std::string key;
  int leaf = -1;  // -1: a stack with no frames
  std::string ranks;
  int threads = 0;
};

// The files a covered rank's record was read from, by inode number (0: none): every writer
// of a rank file replaces it (a new inode), so a file written again after the summary (a
// collection by hand) is told from the directory listing alone, and read instead.
struct CoveredFiles {
  uint64_t watchdog = 0;
  uint64_t forensics = 0;
};

struct NodeSummary {
  int schema_version = 1;
  std::string job_id;
  std::string host;
  double time_unix_s = 0;  // when it was written
  // Ranks of the node whose dumps were done when it was written (their records are here), and
  // ranks of the node that were not (the report reads those from their own files); ascending.
  std::vector<int> covers;
  std::vector<int> lacks;
  std::vector<CoveredFiles> files;  // one per covered rank
  // Stack classes come before the tree in the file (keys are written sorted), so a reader
  // knows whether it needs the tree before reaching it.
  std::vector<NodeStackClass> classes;
  std::vector<RankRecord> ranks;  // ascending; RankThread::stack indexes `classes`
  std::vector<StackTreeNode> tree;
};

// A 128-bit digest of a stack's frames (kind, label; innermost first), as 32 hex digits.
class StackDigest {
 public:
  void add(FrameKind kind, std::string_view label);
  std::string hex() const;

 private:
  uint64_t a_ = 0xcbf29ce484222325ull, b_ = 0x84222325cbf29ce4ull;
  void byte(unsigned char c);
};

nlohmann::json toJson(const NodeSummary& s);
// The nlohmann reader (tests, tools); the report reads summaries with dumpio's fast reader.
// Beyond the field types, it checks what a reader relies on: tree parents come first, class
// leaves and thread stacks point inside the file.
Expected<NodeSummary> nodeSummaryFromText(const std::string& text);
// The checks both readers make once a summary is read; an error names what is wrong.
Expected<bool> checkNodeSummary(const NodeSummary& s, bool tree_read = true);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<StackTreeNode> {
  static constexpr const char* what = "stack tree node";
  static constexpr auto fields = std::tuple{
      field("p", &StackTreeNode::parent, "tree parent"),
      field("k", &StackTreeNode::kind, "tree kind"),
      field("l", &StackTreeNode::label, "tree label"),
  };
};

template <>
struct Schema<NodeStackClass> {
  static constexpr const char* what = "stack class";
  static constexpr auto fields = std::tuple{
      field("key", &NodeStackClass::key, "class key"),
      field("leaf", &NodeStackClass::leaf, "class leaf"),
      field("ranks", &NodeStackClass::ranks, "class ranks"),
      field("threads", &NodeStackClass::threads, "class threads"),
  };
};

template <>
struct Schema<CoveredFiles> {
  static constexpr const char* what = "covered files";
  static constexpr auto fields = std::tuple{
      field("watchdog", &CoveredFiles::watchdog, "watchdog inode"),
      field("forensics", &CoveredFiles::forensics, "forensics inode"),
  };
};

template <>
struct Schema<NodeSummary> {
  static constexpr const char* what = "node summary";
  static constexpr auto fields = std::tuple{
      field("schema_version", &NodeSummary::schema_version, "schema_version"),
      field("job_id", &NodeSummary::job_id, "job_id"),
      field("host", &NodeSummary::host, "host"),
      field("time_unix_s", &NodeSummary::time_unix_s, "time_unix_s"),
      field("covers", &NodeSummary::covers, "covers"),
      field("lacks", &NodeSummary::lacks, "lacks"),
      field("files", &NodeSummary::files, "files"),
      field("classes", &NodeSummary::classes, "classes"),
      field("ranks", &NodeSummary::ranks, "ranks"),
      field("tree", &NodeSummary::tree, "tree"),
  };
};

}  // namespace hangwatch::schema
