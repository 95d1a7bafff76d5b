#include "hangwatch/verdict/collection_status.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_identity.h"

namespace hangwatch::verdict {
namespace fs = std::filesystem;

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

CollectionStatus readCollectionStatus(const std::string& job_dir, double now_unix_s, const std::vector<int>* only) {
  CollectionStatus status;
  std::string host = hostName();
  auto look = [&](int rank, const std::string& path) {
    Expected<RankState> s = readRankState(path);
    if (!s || !stillCollecting(*s, now_unix_s, host)) return;
    status.collecting.push_back(rank);
    status.latest_deadline_unix_s = std::max(status.latest_deadline_unix_s, s->deadline_unix_s);
  };
  if (only) {
    for (int rank : *only) look(rank, rankStatePath(job_dir, rank));
    return status;
  }
  std::error_code ec;
  fs::path ranks = ranksDir(job_dir);
  if (!fs::is_directory(ranks, ec)) return status;
  for (const fs::directory_entry& e : fs::directory_iterator(ranks, ec)) {
    std::optional<RankFile> f = parseRankFileName(e.path().filename().string());
    if (f && f->kind == RankFileKind::kRankState) look(f->rank, e.path().string());
  }
  std::sort(status.collecting.begin(), status.collecting.end());
  return status;
}

}  // namespace hangwatch::verdict
