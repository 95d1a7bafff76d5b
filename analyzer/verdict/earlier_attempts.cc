#include "hangwatch/verdict/earlier_attempts.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

namespace hangwatch::verdict {

std::vector<std::string> idsJoinedButNotMade(const JobData& job) {
  std::set<std::string> made, joined;
  for (const RankSummary& s : job.ranks) {
    made.insert(s.unique_ids_made.begin(), s.unique_ids_made.end());
    for (const SnapshotHostCall& h : s.host_calls)
      if (h.joining && !h.joining->comm.empty()) joined.insert(h.joining->comm);
  }
  std::vector<std::string> out;
  for (const std::string& id : joined)
    if (!made.count(id)) out.push_back(id);
  return out;
}

void noteIdsMadeEarlier(JobData& job, const std::vector<EarlierAttempt>& earlier) {
  const std::vector<std::string> wanted = idsJoinedButNotMade(job);
  if (wanted.empty()) return;
  const std::set<std::string> looking(wanted.begin(), wanted.end());
  namespace fs = std::filesystem;
  for (const EarlierAttempt& a : earlier) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(ranksDir(a.dir), ec)) {
      const std::string file = e.path().filename().string();
      int rank = -1;
      if (std::sscanf(file.c_str(), "r%d.watchdog.json", &rank) != 1 || watchdogSnapshotPath(a.dir, rank) != e.path())
        continue;
      std::ifstream in(e.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto snap = dumpio::watchdogSnapshotFromTextFast(text);
      if (!snap) continue;  // the earlier attempt's own report says what is wrong with it
      for (const std::string& id : snap->unique_ids_made)
        if (looking.count(id)) job.ids_made_earlier[id] = IdMadeEarlier{a.name, rank};
    }
  }
}

}  // namespace hangwatch::verdict
