#include "hangwatch/verdict/collection_status.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_identity.h"

namespace hangwatch::verdict {

namespace {

bool alive(int64_t pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

double wallClockNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool stillCollecting(const RankState& s, double now_unix_s, const std::string& this_host) {
  if (s.settled(now_unix_s)) return false;
  if (!this_host.empty() && s.host == this_host) return s.collector_pid > 0 ? alive(s.collector_pid) : alive(s.pid);
  return true;
}

CollectionStatus readCollectionStatus(const std::string& job_dir, double now_unix_s, const std::vector<int>& ranks) {
  CollectionStatus status;
  const std::string host = hostName();
  for (int rank : ranks) {
    Expected<RankState> s = readRankState(rankStatePath(job_dir, rank));
    if (!s || !stillCollecting(*s, now_unix_s, host)) continue;
    status.collecting.push_back(rank);
    status.latest_deadline_unix_s = std::max(status.latest_deadline_unix_s, s->deadline_unix_s);
  }
  std::sort(status.collecting.begin(), status.collecting.end());
  return status;
}

}  // namespace hangwatch::verdict
