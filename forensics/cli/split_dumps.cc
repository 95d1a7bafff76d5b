#include "hangwatch/forensics/cli/split_dumps.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "hangwatch/common/attempt.h"
#include "hangwatch/common/fallback_record.h"
#include "hangwatch/stackmerge/rank_set.h"

namespace hangwatch::forensics {
namespace fs = std::filesystem;
namespace {

struct Copy {
  size_t source = 0;  // 0: the job's own folder when it is there, then the fallbacks in order
  fs::path path;
  fs::file_time_type mtime;
};

// The rank a dump file belongs to (ranks/r00007.watchdog.json, metrics/r00007.jsonl), if any.
std::optional<int> rankOfFile(const fs::path& rel) {
  const std::string name = rel.filename().string();
  if (name.size() < 7 || name[0] != 'r') return std::nullopt;
  int rank = 0;
  for (size_t i = 1; i < 6; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    rank = rank * 10 + (name[i] - '0');
  }
  return rank;
}

std::string jobName(const std::string& job_dir) {
  fs::path p = fs::path(job_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

std::string fallbackJobFolder(const std::string& dir, const std::string& job_dir) {
  std::error_code ec;
  if (readFallbackRecord(dir).ok() || isJobFolder(dir)) return dir;
  const fs::path nested = fs::path(dir) / jobName(job_dir);
  if (fs::is_directory(nested, ec)) return nested.string();
  return dir;
}

Expected<MergedDumps> MergedDumps::make(const std::string& job_dir, const std::vector<std::string>& fallbacks) {
  std::error_code ec;
  std::vector<std::string> sources;
  const bool own = fs::is_directory(job_dir, ec);
  if (own) sources.push_back(job_dir);
  for (const std::string& f : fallbacks) {
    if (!fs::is_directory(f, ec)) return Error{"--fallback " + f + " is not a readable directory"};
    sources.push_back(f);
  }
  std::map<fs::path, std::vector<Copy>> files;
  for (size_t i = 0; i < sources.size(); ++i) {
    fs::recursive_directory_iterator it(sources[i], fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const fs::path rel = fs::relative(it->path(), sources[i], ec);
      // Reports written earlier are not dumps; a temporary name is a write still under way.
      if (it->is_directory(ec)) {
        if (rel.filename() == "report") it.disable_recursion_pending();
        continue;
      }
      const std::string name = rel.filename().string();
      if (!it->is_regular_file(ec) || name.find(".tmp.") != std::string::npos || name == "FALLBACK.json") continue;
      files[rel].push_back({own ? i : i + 1, it->path(), it->last_write_time(ec)});
    }
    if (ec) return Error{fmt::format("cannot read {}: {}", sources[i], ec.message())};
  }

  MergedDumps m;
  std::string root = (fs::temp_directory_path(ec) / "hangwatch-merged-XXXXXX").string();
  if (::mkdtemp(root.data()) == nullptr) return Error{"cannot make a temporary folder: " + std::string(strerror(errno))};
  m.root_ = root;
  m.job_dir_ = job_dir;
  m.dir_ = root + "/" + jobName(job_dir);
  std::map<size_t, std::set<int>> ranks_from;   // fallback source -> ranks whose files came from it
  std::map<size_t, size_t> files_from;
  for (const auto& [rel, copies] : files) {
    const fs::path target = fs::path(m.dir_) / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec) return Error{fmt::format("cannot make {}: {}", target.parent_path().string(), ec.message())};
    if (copies.size() > 1 && rel.extension() == ".jsonl") {
      // Metrics lines: those written before the folder was given up, then those after.
      std::ofstream out(target);
      for (const Copy& c : copies) out << std::ifstream(c.path).rdbuf();
      for (const Copy& c : copies)
        if (c.source > 0) ++files_from[c.source];
      continue;
    }
    const Copy* newest = &copies.front();
    for (const Copy& c : copies)
      if (c.mtime > newest->mtime) newest = &c;
    fs::create_symlink(fs::absolute(newest->path, ec), target, ec);
    if (ec) return Error{fmt::format("cannot link {}: {}", target.string(), ec.message())};
    if (newest->source > 0) {
      ++files_from[newest->source];
      if (std::optional<int> r = rankOfFile(rel)) ranks_from[newest->source].insert(*r);
    }
  }
  if (!own) m.notes_.push_back(fmt::format("the job's own folder {} could not be read: the report is made from the "
                                           "fallback folder(s) alone", job_dir));
  for (size_t i = 0; i < fallbacks.size(); ++i) {
    const size_t source = i + 1;
    if (files_from[source] == 0) {
      m.notes_.push_back(fmt::format("the fallback folder {} holds no file newer than the job folder's", fallbacks[i]));
      continue;
    }
    stackmerge::RankSet ranks;
    for (int r : ranks_from[source]) ranks.insert(r);
    std::string whose;
    if (Expected<FallbackRecord> rec = readFallbackRecord(fallbacks[i]))
      whose = fmt::format(" (host {}: the dump folder was given up: {})", rec->host, rec->why);
    m.notes_.push_back(fmt::format("{} file(s){} come from the fallback folder {}{}", files_from[source],
                                   ranks.empty() ? "" : " of rank(s) " + ranks.toString(), fallbacks[i], whose));
  }
  return m;
}

MergedDumps::MergedDumps(MergedDumps&& other) noexcept
    : root_(std::move(other.root_)), dir_(std::move(other.dir_)), job_dir_(std::move(other.job_dir_)),
      notes_(std::move(other.notes_)) {
  other.root_.clear();
}

MergedDumps::~MergedDumps() {
  if (root_.empty()) return;
  std::error_code ec;
  fs::remove_all(root_, ec);  // the links only, never what they point to
}

std::string MergedDumps::original(const std::string& merged_path) const {
  if (merged_path.compare(0, dir_.size(), dir_) != 0) return merged_path;
  return job_dir_ + merged_path.substr(dir_.size());
}

}  // namespace hangwatch::forensics
