#pragma once
// Every rank's profile of one job directory (metrics/rNNNNN.jsonl, timeline/rNNNNN.json),
// the communicators they share, and what could not be read. Missing and corrupt files
// are noted, never fatal; only a job with no readable metrics at all is an error.
#include <map>
#include <string>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/slowdown/rank_profile.h"

namespace hangwatch::slowdown {

struct CommunicatorInfo {
  std::string hash;
  int size = 0;
  std::map<int, int> global_by_comm_rank;  // ring order: comm rank -> global rank
  std::vector<int> members() const;        // global ranks, ascending
  // Ring links (global ranks) in simnccl/NCCL ring order, when every position is known.
  std::vector<std::pair<int, int>> ringLinks() const;
};

class JobProfile {
 public:
  static Expected<JobProfile> load(const std::string& job_dir);

  const std::string& jobDir() const { return job_dir_; }
  const std::map<int, RankProfile>& ranks() const { return ranks_; }
  const std::map<std::string, CommunicatorInfo>& communicators() const { return comms_; }
  // Human sentences: unreadable files, ranks without metrics, skipped lines.
  const std::vector<std::string>& problems() const { return problems_; }
  // Ranks that appear in a communicator or a timeline but have no usable metrics.
  const std::vector<int>& ranksMissing() const { return missing_; }

  // Every rank's timeline as read (ranks that wrote one and have metrics).
  const std::map<int, TimelineWindow>& timelines() const { return timelines_; }

  // For tests: build from profiles (and timelines) directly.
  static JobProfile fromProfiles(std::vector<RankProfile> ranks, std::map<int, TimelineWindow> timelines = {});

 private:
  void indexCommunicators();

  std::string job_dir_;
  std::map<int, RankProfile> ranks_;
  std::map<int, TimelineWindow> timelines_;
  std::map<std::string, CommunicatorInfo> comms_;
  std::vector<std::string> problems_;
  std::vector<int> missing_;
};

}  // namespace hangwatch::slowdown
