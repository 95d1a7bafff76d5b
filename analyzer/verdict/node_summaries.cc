#include "hangwatch/verdict/node_summaries.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/dumpio/node_summary_fast_reader.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/dump_file_text.h"
#include "hangwatch/verdict/rank_dump_reader.h"

namespace hangwatch::verdict {
namespace fs = std::filesystem;

namespace {

// The node's distinct stacks as a prefix tree (outermost frame at the root) and one class per
// stack; `ids` maps the node table's stack ids to class indexes.
void addStackClasses(NodeSummary& out, const stackmerge::StackTable& table, std::map<uint32_t, int>& ids) {
  std::map<std::tuple<int, FrameKind, std::string_view>, int> children;
  for (auto& [id, index] : ids) {
    std::span<const stackmerge::TableFrame> frames = table.frames(id);
    NodeStackClass c;
    StackDigest digest;
    for (const stackmerge::TableFrame& f : frames) digest.add(f.kind, f.label);
    c.key = digest.hex();
    int parent = -1;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      auto [it, fresh] = children.try_emplace({parent, f->kind, f->label}, static_cast<int>(out.tree.size()));
      if (fresh) out.tree.push_back({parent, f->kind, std::string(f->label)});
      parent = it->second;
    }
    c.leaf = parent;
    index = static_cast<int>(out.classes.size());
    out.classes.push_back(std::move(c));
  }
}

uint64_t inodeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

NodeSummary NodeSummaryBuilder::build(const std::string& job_dir, const std::string& host, const std::vector<int>& ranks,
                                      double now_unix_s) {
  NodeSummary out;
  out.host = host;
  out.time_unix_s = now_unix_s;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  stackmerge::StackTable table;
  for (int rank : sorted) {
    if (rank < 0) continue;
    // Only a rank whose dumps are done: its files change no more.
    Expected<RankState> state = readRankState(rankStatePath(job_dir, rank));
    if (!state || !state->done()) {
      out.lacks.push_back(rank);
      continue;
    }
    // Inodes taken before reading: a file replaced in between is then told by its inode, and read.
    CoveredFiles files{inodeOf(watchdogSnapshotPath(job_dir, rank)), inodeOf(forensicsDumpPath(job_dir, rank))};
    RankSummary s = RankDumpReader::read(job_dir, rank, table, Stage::kHang);
    out.files.push_back(files);
    if (out.job_id.empty() && s.has_snapshot) out.job_id = s.job_id;
    out.covers.push_back(rank);
    out.ranks.push_back(std::move(static_cast<RankRecord&>(s)));
  }
  // Classes in the order their first thread appears.
  std::map<uint32_t, int> ids;
  for (const RankRecord& r : out.ranks)
    for (const RankThread& t : r.threads) ids.try_emplace(t.stack, 0);
  addStackClasses(out, table, ids);
  std::vector<stackmerge::RankSet> class_ranks(out.classes.size());
  for (RankRecord& r : out.ranks) {
    for (RankThread& t : r.threads) {
      t.stack = static_cast<uint32_t>(ids.at(t.stack));
      class_ranks[t.stack].insert(r.rank);
      ++out.classes[t.stack].threads;
    }
  }
  for (size_t i = 0; i < out.classes.size(); ++i) out.classes[i].ranks = class_ranks[i].toString();
  return out;
}

Expected<std::string> NodeSummaryBuilder::write(const std::string& job_dir, const NodeSummary& summary) {
  const std::string path = nodeSummaryPath(job_dir, summary.host);
  if (Expected<Written> w = writeFileAtomically(path, toJson(summary).dump() + "\n"); !w) return Error{w.error()};
  return path;
}

NodeSummaryReader::Node NodeSummaryReader::read(const std::string& path) {
  Node node;
  node.path = path;
  thread_local DumpFileText file;
  if (!file.open(path)) {
    node.problem = "cannot be opened";
    return node;
  }
  auto need_tree = [&](const NodeSummary& s) {
    std::lock_guard lock(mutex_);
    return std::any_of(s.classes.begin(), s.classes.end(), [&](const NodeStackClass& c) { return !by_digest_.count(c.key); });
  };
  Expected<dumpio::NodeSummaryRead> read = dumpio::nodeSummaryFromPaddedText(file.text(), {need_tree});
  if (!read) {
    node.problem = read.error();
    return node;
  }
  NodeSummary& s = read->summary;
  // Every unknown class checked against its key before any is interned: a damaged file adds
  // nothing to the job's table.
  std::vector<uint32_t> ids(s.classes.size());
  std::vector<std::optional<stackmerge::StackTable::Builder>> fresh(s.classes.size());
  for (size_t i = 0; i < s.classes.size(); ++i) {
    const NodeStackClass& c = s.classes[i];
    {
      std::lock_guard lock(mutex_);
      if (auto it = by_digest_.find(c.key); it != by_digest_.end()) {
        ids[i] = it->second;
        continue;
      }
    }
    if (!read->tree_read) {
      node.problem = "a stack class is neither known nor in its tree";
      return node;
    }
    stackmerge::StackTable::Builder& b = fresh[i].emplace();
    StackDigest digest;
    for (int at = c.leaf; at >= 0; at = s.tree[static_cast<size_t>(at)].parent) {
      const StackTreeNode& f = s.tree[static_cast<size_t>(at)];
      b.addLabel(f.kind, f.label);
      digest.add(f.kind, f.label);
    }
    if (digest.hex() != c.key) {
      node.problem = fmt::format("stack class {}'s frames do not match its key", i);
      return node;
    }
  }
  for (size_t i = 0; i < s.classes.size(); ++i) {
    if (!fresh[i]) continue;
    ids[i] = stacks_.intern(*fresh[i]);
    std::lock_guard lock(mutex_);
    by_digest_.try_emplace(s.classes[i].key, ids[i]);
  }
  node.ranks.reserve(s.ranks.size());
  node.files = std::move(s.files);
  for (RankRecord& r : s.ranks) {
    for (RankThread& t : r.threads) t.stack = ids[t.stack];
    RankSummary summary;
    static_cast<RankRecord&>(summary) = std::move(r);
    node.ranks.push_back(std::move(summary));
  }
  return node;
}

std::vector<std::string> listNodeSummaries(const std::string& job_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(nodesDir(job_dir), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name[0] != '.' && name.ends_with(".json")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hangwatch::verdict
