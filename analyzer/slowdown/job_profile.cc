#include "hangwatch/slowdown/job_profile.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/timeline_window.h"

namespace hangwatch::slowdown {
namespace {

namespace fs = std::filesystem;

// Rank numbers of the files of `kind` in `dir`.
std::set<int> ranksWithFiles(const std::string& dir, RankFileKind kind) {
  std::set<int> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::optional<RankFile> f = parseRankFileName(entry.path().filename().string());
    if (f && f->kind == kind) out.insert(f->rank);
  }
  return out;
}

}  // namespace

std::vector<int> CommunicatorInfo::members() const {
  std::vector<int> out;
  for (const auto& [cr, g] : global_by_comm_rank) out.push_back(g);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int, int>> CommunicatorInfo::ringLinks() const {
  if (size < 2 || static_cast<int>(global_by_comm_rank.size()) != size) return {};
  std::vector<std::pair<int, int>> links;
  for (int r = 0; r < size; ++r) {
    auto from = global_by_comm_rank.find(r), to = global_by_comm_rank.find((r + 1) % size);
    if (from == global_by_comm_rank.end() || to == global_by_comm_rank.end()) return {};
    links.emplace_back(from->second, to->second);
  }
  return links;
}

Expected<JobProfile> JobProfile::load(const std::string& job_dir) {
  JobProfile job;
  job.job_dir_ = job_dir;
  const std::string metrics_dir = metricsDir(job_dir);
  std::error_code ec;
  if (!fs::is_directory(job_dir, ec)) return Error{job_dir + " is not a directory"};
  if (!fs::is_directory(metrics_dir, ec)) return Error{"no metrics/ in " + job_dir + " (was the watchdog loaded?)"};
  const std::set<int> metric_ranks = ranksWithFiles(metrics_dir, RankFileKind::kMetrics);
  const std::set<int> timeline_ranks = ranksWithFiles(timelineDir(job_dir), RankFileKind::kTimeline);
  for (int rank : metric_ranks) {
    Expected<MetricsFile> file = readMetricsFile(metricsPath(job_dir, rank));
    if (!file) {
      job.problems_.push_back(fmt::format("rank {}: {}", rank, file.error()));
      continue;
    }
    if (file->bad_lines > 0)
      job.problems_.push_back(fmt::format("rank {}: {} unreadable metrics line(s) skipped", rank, file->bad_lines));
    if (file->windows.empty()) {
      job.problems_.push_back(fmt::format("rank {}: no readable metrics window", rank));
      continue;
    }
    std::optional<TimelineWindow> timeline;
    if (timeline_ranks.count(rank)) {
      Expected<TimelineWindow> t = readTimelineFile(timelinePath(job_dir, rank));
      if (t)
        timeline = std::move(*t);
      else
        job.problems_.push_back(fmt::format("rank {}: {}", rank, t.error()));
    }
    RankProfile p = profileRank(*file, timeline ? &*timeline : nullptr);
    p.rank = rank;  // the file name is the rank the watchdog meant
    job.ranks_.emplace(rank, std::move(p));
    if (timeline) job.timelines_.emplace(rank, std::move(*timeline));
  }
  if (job.ranks_.empty()) {
    std::string why = metric_ranks.empty() ? "no metrics/rNNNNN.jsonl files" : "no readable metrics file";
    for (const std::string& p : job.problems_) why += "; " + p;
    return Error{why + " in " + job_dir};
  }
  job.indexCommunicators();
  return job;
}

JobProfile JobProfile::fromProfiles(std::vector<RankProfile> ranks, std::map<int, TimelineWindow> timelines) {
  JobProfile job;
  job.timelines_ = std::move(timelines);
  for (RankProfile& p : ranks) job.ranks_.emplace(p.rank, std::move(p));
  job.indexCommunicators();
  return job;
}

void JobProfile::indexCommunicators() {
  std::set<int> expected;
  for (const auto& [rank, p] : ranks_) {
    for (const auto& [key, c] : p.collectives) {
      CommunicatorInfo& info = comms_[c.comm];
      info.hash = c.comm;
      info.size = std::max(info.size, c.comm_size);
      if (c.comm_rank) info.global_by_comm_rank[*c.comm_rank] = rank;
    }
  }
  // The world communicator's size says how many ranks the job had.
  int world = 0;
  for (const auto& [hash, info] : comms_) world = std::max(world, info.size);
  for (int r = 0; r < world; ++r)
    if (!ranks_.count(r)) missing_.push_back(r);
  if (!missing_.empty()) {
    problems_.push_back(fmt::format("no usable metrics from rank(s) {}: they are left out of the comparison",
                                    fmt::join(missing_, ",")));
  }
}

}  // namespace hangwatch::slowdown
