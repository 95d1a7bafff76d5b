#include "hangwatch/verdict/job_loader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/collection_status.h"
#include "hangwatch/verdict/gpu_ranks.h"
#include "hangwatch/verdict/node_summaries.h"
#include "hangwatch/verdict/rank_dump_reader.h"

namespace hangwatch::verdict {
namespace fs = std::filesystem;

const char* stageName(Stage s) {
  switch (s) {
    case Stage::kSuspected: return "suspected";
    case Stage::kHang: return "hang";
    case Stage::kNone: break;
  }
  return "none";
}

const RankSummary* JobData::find(int rank) const {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank,
                             [](const RankSummary& s, int r) { return s.rank < r; });
  return it != ranks.end() && it->rank == rank ? &*it : nullptr;
}

const ExitedRank* JobData::exited(int rank) const {
  auto it = std::find_if(ranks_exited.begin(), ranks_exited.end(), [&](const ExitedRank& e) { return e.rank == rank; });
  return it != ranks_exited.end() ? &*it : nullptr;
}

std::string RankSummary::lacking(const std::string& comm) const {
  if (!answered()) return collecting ? "its dumps are still being collected" : "no dump";
  if (!has_snapshot) return "no watchdog snapshot (" + (snapshot_problem.empty() ? std::string("no file") : snapshot_problem) + ")";
  if (!has_forensics) {
    if (collecting) return "its forensics dump is still being collected";
    return "no forensics dump (" + (forensics_problem.empty() ? std::string("no file") : forensics_problem) + ")";
  }
  bool ring = std::any_of(ring_progress.begin(), ring_progress.end(), [&](const RingProgress& r) { return r.comm == comm; });
  if (ring || comm.empty()) return "";
  if (!target_exited_during.empty())
    return "no ring progress: its process exited during the collector's " + target_exited_during + " phase";
  if (collecting) return "its ring progress is still being read";
  return "no ring progress" + (collector_errors.empty() ? std::string() : " (" + collector_errors.front() + ")");
}

namespace {

std::string rangesText(const std::vector<int>& sorted) {
  stackmerge::RankSet set;
  for (int r : sorted) set.insert(r);
  return set.toString();
}

void readTrigger(JobData& job) {
  const std::string path = triggerPath(job.job_dir);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
  Expected<TriggerRecord> t = readTriggerFile(path);
  if (!t) {
    // Named by its file name alone: the folder is in the report's header.
    const std::string& e = t.error();
    job.trigger_problem = "TRIGGER.json" + e.substr(std::min(e.size(), path.size()));
    return;
  }
  job.trigger = std::move(*t);
}

// Without a trigger, the newest early warning (SUSPECT.json, SUSPECT.<n>.json) makes the job
// "suspected": its record stands in for the trigger and the ranks' suspect snapshots are read.
void readSuspect(JobData& job) {
  if (job.trigger || !job.trigger_problem.empty()) return;
  int newest = 0;
  for (int episode = 1;; ++episode) {
    struct stat st;
    if (::stat(suspectPath(job.job_dir, episode).c_str(), &st) != 0) break;
    newest = episode;
  }
  if (newest == 0) return;
  job.stage = Stage::kSuspected;
  job.suspect.episode = newest;
  Expected<TriggerRecord> t = readTriggerFile(suspectPath(job.job_dir, newest));
  if (t) job.trigger = std::move(*t);
  else job.problems.push_back("the early warning's record: " + t.error());
}

// A suspect snapshot of an earlier warning says nothing about the newest one.
void keepNewestWarning(JobData& job, std::vector<RankSummary>& read) {
  std::vector<RankSummary> kept;
  for (RankSummary& s : read) {
    if (s.has_snapshot && s.suspect && s.suspect->episode < job.suspect.episode) {
      job.suspect.other_episode.push_back(s.rank);
      continue;
    }
    if (s.suspect && s.suspect->resumed_after_s) {
      job.suspect.resumed.push_back(s.rank);
      job.suspect.resumed_after_s = std::max(job.suspect.resumed_after_s, *s.suspect->resumed_after_s);
    }
    kept.push_back(std::move(s));
  }
  if (!job.suspect.other_episode.empty())
    job.problems.push_back(fmt::format("rank(s) {} left only a snapshot of an earlier warning: not used",
                                       rangesText(job.suspect.other_episode)));
  read = std::move(kept);
}

// The job most snapshots name; snapshots of any other job are set aside, never mixed in.
void dropForeignRanks(JobData& job, std::vector<RankSummary>& read) {
  std::map<std::string, int> votes;
  for (const RankSummary& s : read) {
    if (s.has_snapshot && !s.job_id.empty()) ++votes[s.job_id];
  }
  fs::path dir = fs::path(job.job_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  // A later attempt's folder is <job-dir>/attempts/<name>.
  if (dir.parent_path().filename() == "attempts") dir = dir.parent_path().parent_path();
  std::string base = dir.filename().string();
  job.job_id = base;
  int best = 0;
  for (const auto& [id, n] : votes) {
    if (n > best || (n == best && id == base)) {
      best = n;
      job.job_id = id;
    }
  }
  std::map<std::string, std::vector<int>> foreign;
  std::vector<RankSummary> kept;
  kept.reserve(read.size());
  for (RankSummary& s : read) {
    if (s.has_snapshot && !s.job_id.empty() && s.job_id != job.job_id) {
      foreign[s.job_id].push_back(s.rank);
      continue;
    }
    kept.push_back(std::move(s));
  }
  for (const auto& [id, ranks] : foreign) {
    job.problems.push_back("dumps of rank(s) " + rangesText(ranks) + " belong to job '" + id + "', not '" +
                           job.job_id + "': set aside (those ranks count as missing)");
  }
  read = std::move(kept);
}

void findWorldSize(JobData& job, int highest_file_rank) {
  int world = 0;
  for (const RankSummary& s : job.ranks) {
    if (s.world_size) world = std::max(world, *s.world_size);
  }
  if (world == 0) {
    // No launcher said: a communicator's size, in processes (one process may hold several
    // of its ranks, one per device it drives).
    for (const RankSummary& s : job.ranks) {
      std::map<std::string, int> held;
      for (const SnapshotComm& c : s.comms)
        if (c.rank >= 0) ++held[c.hash];
      for (const SnapshotComm& c : s.comms) {
        const int per_process = std::max(1, held[c.hash]);
        world = std::max(world, (c.size + per_process - 1) / per_process);
      }
    }
  }
  job.world_size_known = world > 0;
  int highest = highest_file_rank;
  if (job.trigger && job.trigger->rank) highest = std::max(highest, *job.trigger->rank);
  job.world_size = std::max(world, highest + 1);
}

// A collector that was off by configuration (HANGWATCH_COLLECT=0) failed nothing: one sentence.
bool collectorOff(const RankSummary& s) { return s.state && s.state->forensics == "off" && !s.has_forensics; }

void findMissingAndPartial(JobData& job) {
  std::vector<bool> seen(job.world_size, false);
  std::vector<int> off;
  for (const RankSummary& s : job.ranks) {
    if (s.rank >= 0 && s.rank < job.world_size) seen[s.rank] = true;
    if (!s.has_snapshot) {
      job.ranks_partial.push_back({s.rank, "watchdog snapshot", s.snapshot_problem.empty() ? "no file" : s.snapshot_problem});
    }
    if (job.stage == Stage::kSuspected) continue;  // an early warning runs no collector
    if (collectorOff(s)) {
      off.push_back(s.rank);
      continue;
    }
    if (!s.has_forensics) {
      std::string why = s.forensics_problem.empty() ? "no file" : s.forensics_problem;
      if (s.collecting) why = "still being collected";
      else if (s.state && !s.state->done() && s.forensics_problem.empty()) why = "its collector did not finish by its deadline";
      // The rank said why before it died (e.g. the launcher's SIGTERM went on while its collector ran).
      if (s.state && !s.state->done() && !s.state->note.empty()) why += ": " + s.state->note;
      job.ranks_partial.push_back({s.rank, "forensics dump", why});
    } else if (!s.target_exited_during.empty()) {
      job.ranks_partial.push_back({s.rank, "part of the forensics dump",
                                   "the process exited during the collector's " + s.target_exited_during +
                                       " phase (killed by its launcher?): what was read before is kept"});
    } else if (!s.collector_errors.empty()) {
      job.ranks_partial.push_back({s.rank, "part of the forensics dump", "collector reported: " + s.collector_errors.front()});
    }
  }
  for (int r = 0; r < job.world_size; ++r) {
    if (!seen[r]) job.ranks_missing.push_back(r);
  }
  if (!off.empty())
    job.problems.push_back(fmt::format(
        "the collector was off (HANGWATCH_COLLECT=0) on rank(s) {}: no stacks and no debugger's ring progress from "
        "them; the verdict rests on their snapshots",
        rangesText(off)));
}

// Every rank dumps within seconds of TRIGGER.json; a snapshot stamped before it, or long
// after, says that host's clock differs from the trigger host's.
void checkClockSkew(JobData& job) {
  if (!job.trigger || job.trigger->time_unix_s <= 0) return;
  std::map<std::string, std::pair<double, double>> by_host;  // min, max of (snapshot - trigger)
  for (const RankSummary& s : job.ranks) {
    if (!s.has_snapshot || s.snapshot_time_unix_s <= 0) continue;
    double d = s.snapshot_time_unix_s - job.trigger->time_unix_s;
    auto [it, fresh] = by_host.try_emplace(s.host, d, d);
    if (!fresh) {
      it->second.first = std::min(it->second.first, d);
      it->second.second = std::max(it->second.second, d);
    }
  }
  for (const auto& [host, range] : by_host) {
    if (range.first < -1.0) {
      job.problems.push_back(fmt::format("clock skew: host {} stamped its snapshots {:.1f} s before TRIGGER.json was "
                                         "written on host {}: its clock is behind by at least that; the verdict uses "
                                         "operation ages, not wall clocks",
                                         host, -range.first, job.trigger->host));
    } else if (range.second > 300.0) {
      job.problems.push_back(fmt::format("clock skew or a late dump: host {} stamped its snapshots {:.0f} s after "
                                         "TRIGGER.json; the verdict uses operation ages, not wall clocks",
                                         host, range.second));
    }
  }
}

// `each(i)` for i in [0, n), on up to `threads` threads (the caller's among them).
template <typename F>
void parallelFor(size_t n, unsigned threads, F&& each) {
  const unsigned used = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(1, n)));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) each(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < used; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

// The ranks that have a file of the kinds this stage reads, with the inode numbers of their
// snapshot and forensics dump (the listing gives them: no call per file), and how many
// collections by hand without a rank there are.
struct RankListing {
  std::set<int> ranks;
  std::unordered_map<int, CoveredFiles> files;
  size_t by_hand = 0;
  std::set<int> ras_answers;  // ranks/rNNNNN.ras.json: RAS asked with the collector off
};

RankListing listRankFiles(const JobData& job, bool suspected) {
  RankListing out;
  if (DIR* d = ::opendir(ranksDir(job.job_dir).c_str())) {
    while (const struct dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      std::optional<RankFile> f = parseRankFileName(std::string(name));
      const bool wanted = f && (suspected ? f->kind == RankFileKind::kSuspectSnapshot
                                          : f->kind == RankFileKind::kWatchdogSnapshot ||
                                                f->kind == RankFileKind::kForensicsDump ||
                                                f->kind == RankFileKind::kRankState);
      if (wanted) {
        out.ranks.insert(f->rank);
        CoveredFiles& files = out.files[f->rank];
        if (f->kind == RankFileKind::kWatchdogSnapshot) files.watchdog = e->d_ino;
        if (f->kind == RankFileKind::kForensicsDump) files.forensics = e->d_ino;
      } else if (f && f->kind == RankFileKind::kRasAnswer && !suspected) {
        out.ras_answers.insert(f->rank);
      } else if (isDumpByHandName(std::string(name))) {
        ++out.by_hand;
      }
    }
    ::closedir(d);
  }
  return out;
}

// NCCL's RAS as `forensics ras` asked it for a rank's node, where no collector ran: taken
// where the rank's own dumps carry no question (a collector's, when there is one, asked too).
void takeRasAnswers(JobData& job, const std::set<int>& ras_answers, std::vector<RankSummary>& read) {
  for (RankSummary& s : read) {
    if (s.ras || !ras_answers.count(s.rank)) continue;
    const std::string path = rasAnswerPath(job.job_dir, s.rank);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    Expected<RasAnswer> answer = rasAnswerFromText(text.str());
    if (!answer) {
      job.problems.push_back(fmt::format("{} is not usable: {}", path, answer.error()));
      continue;
    }
    if (answer->pid != 0 && s.pid != 0 && answer->pid != s.pid) {
      job.problems.push_back(
          fmt::format("{} asked for pid {}, not rank {}'s pid {}: not used", path, answer->pid, s.rank, s.pid));
      continue;
    }
    if (!answer->ras.error.empty())
      job.problems.push_back(fmt::format("NCCL's RAS, asked from the node of rank {} (the collector was off), gave no "
                                         "answer: {}",
                                         s.rank, answer->ras.error));
    s.ras = std::move(answer->ras);
  }
}

}  // namespace

namespace {

int countMetricsFiles(const std::string& job_dir) {
  int n = 0;
  std::error_code ec;
  fs::path metrics_dir = metricsDir(job_dir);
  if (!fs::is_directory(metrics_dir, ec)) return 0;
  for (const fs::directory_entry& e : fs::directory_iterator(metrics_dir, ec))
    if (e.path().extension() == ".jsonl") ++n;
  return n;
}

// Node summaries first: a rank one usable summary covers, and whose files are listed, is taken
// from it (into `read`); every other rank is read from its own files. Returns the covered ranks.
std::set<int> takeNodeSummaries(JobData& job, const RankListing& listing, unsigned threads,
                                std::vector<RankSummary>& read) {
  std::set<int> covered;
  std::vector<std::string> paths = listNodeSummaries(job.job_dir);
  std::vector<NodeSummaryReader::Node> nodes(paths.size());
  NodeSummaryReader reader(*job.stacks);
  parallelFor(paths.size(), threads, [&](size_t i) { nodes[i] = reader.read(paths[i]); });
  std::map<int, int> times;
  size_t rewritten = 0;
  for (const NodeSummaryReader::Node& n : nodes)
    for (const RankSummary& s : n.ranks) ++times[s.rank];
  for (NodeSummaryReader::Node& n : nodes) {
    if (!n.problem.empty()) {
      job.read_notes.push_back(fs::path(n.path).filename().string() + " not used (" + n.problem +
                               "): its ranks are read from their own files");
      continue;
    }
    ++job.node_summaries_used;
    for (size_t i = 0; i < n.ranks.size(); ++i) {
      RankSummary& s = n.ranks[i];
      auto now = listing.files.find(s.rank);
      if (times[s.rank] != 1 || now == listing.files.end()) continue;
      // A snapshot or dump written again since the summary (or gone): read the files.
      if (now->second.watchdog != n.files[i].watchdog || now->second.forensics != n.files[i].forensics) {
        ++rewritten;
        continue;
      }
      covered.insert(s.rank);
      read.push_back(std::move(s));
    }
  }
  if (std::any_of(times.begin(), times.end(), [](const auto& t) { return t.second > 1; }))
    job.read_notes.push_back("ranks in more than one node summary are read from their own files");
  if (rewritten > 0)
    job.read_notes.push_back(fmt::format("{} rank(s) have files other than those their node summary was made from "
                                         "(written again since, or a file system whose listing shows other inode "
                                         "numbers): read from their files",
                                         rewritten));
  return covered;
}

// The ranks read go into the job: answered, gone or frozen (a node peer saw the process exit or
// stopped), or missing.
void admitRanks(JobData& job, std::vector<RankSummary>& read) {
  const double now = wallClockNow();
  const std::string host = hostName();
  for (RankSummary& s : read) {
    s.collecting = s.state && stillCollecting(*s.state, now, host);
    if (s.collecting) job.ranks_collecting.push_back(s.rank);
    if (s.answered()) {
      job.ranks.push_back(std::move(s));
    } else if (s.state && (s.state->exited_seen_by || s.state->stopped_seen_by)) {
      const RankState& st = *s.state;
      const bool stopped = !st.exited_seen_by.has_value();
      const int seen_by = stopped ? *st.stopped_seen_by : *st.exited_seen_by;
      job.ranks_exited.push_back({s.rank, st.pid, st.host, st.device, seen_by, stopped, st.note, st.exited_on_term});
      job.problems.push_back(fmt::format("rank {}: no dump, its process (pid {} on {}) {} when rank {} of its node dumped",
                                         s.rank, st.pid, st.host,
                                         stopped              ? "was stopped (frozen)"
                                         : st.exited_on_term ? "had ended on the launcher's SIGTERM (nothing pending)"
                                                              : "had exited",
                                         seen_by));
    } else if (!s.collecting) {
      job.problems.push_back(fmt::format("rank {}: no usable file (watchdog snapshot: {}; forensics dump: {})", s.rank,
                                         s.snapshot_problem.empty() ? "no file" : s.snapshot_problem,
                                         s.forensics_problem.empty() ? "no file" : s.forensics_problem));
    }
  }
}

// The last complete line of a rank's metrics file, read from its tail only.
std::optional<MetricsWindow> lastMetricsWindow(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  constexpr std::streamoff kTail = 256 * 1024;  // a window line is a few KB; many op kinds, tens
  in.seekg(std::max<std::streamoff>(0, size - kTail));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!tail.empty() && tail.back() != '\n') tail.pop_back();  // a torn last line
  if (!tail.empty()) tail.pop_back();
  const size_t start = tail.rfind('\n');
  auto j = nlohmann::json::parse(tail.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  Expected<MetricsWindow> w = metricsWindowFromJson(j);
  if (!w) return std::nullopt;
  return std::move(*w);
}

// A rank without a dump, and without a node peer's word, is placed by its last metrics window.
// The first few only: the wording names at most eight, and a job whose ranks are mostly
// missing must not cost a file read per rank.
void placeMissingRanks(JobData& job) {
  // GPU ranks: the metrics files are named by the launcher's rank, which a missing GPU rank's
  // process is not known by.
  if (!job.gpu_ranks.empty()) return;
  constexpr int kMostLookedUp = 64;
  int looked_up = 0;
  for (int r : job.ranks_missing) {
    if (job.exited(r)) continue;
    if (++looked_up > kMostLookedUp) break;
    std::optional<MetricsWindow> w = lastMetricsWindow(metricsPath(job.job_dir, r));
    if (!w || w->rank != r || w->host.empty()) continue;
    job.ranks_placed[r] = RankPlace{w->host, w->device, w->pid};
  }
}

}  // namespace

Expected<JobData> JobLoader::load(const std::string& job_dir) const {
  std::error_code ec;
  if (!fs::is_directory(job_dir, ec)) return Error{job_dir + " is not a directory"};
  JobData job;
  job.job_dir = job_dir;
  readTrigger(job);
  if (job.trigger || !job.trigger_problem.empty()) job.stage = Stage::kHang;
  readSuspect(job);
  const bool suspected = job.stage == Stage::kSuspected;

  RankListing listing = listRankFiles(job, suspected);
  job.metrics_files = countMetricsFiles(job_dir);
  const unsigned threads = threads_ ? threads_ : std::max(1u, std::thread::hardware_concurrency());
  std::vector<RankSummary> read;
  std::set<int> covered;
  if (options_.node_summaries && !suspected) covered = takeNodeSummaries(job, listing, threads, read);
  auto uncoveredRanks = [&] {
    std::vector<int> out;
    for (int r : listing.ranks)
      if (!covered.count(r)) out.push_back(r);
    return out;
  };
  std::vector<int> ranks = uncoveredRanks();
  if (options_.before_rank_files && options_.before_rank_files(ranks)) {
    listing = listRankFiles(job, suspected);
    ranks = uncoveredRanks();
  }
  if (listing.by_hand > 0) {
    job.problems.push_back(fmt::format(
        "{} collection(s) by hand without a rank (ranks/p<PID>.forensics.json) are not used", listing.by_hand));
  }
  const size_t from_summaries = read.size();
  read.resize(from_summaries + ranks.size());
  parallelFor(ranks.size(), threads, [&](size_t i) {
    read[from_summaries + i] = RankDumpReader::read(job_dir, ranks[i], *job.stacks, job.stage);
  });
  std::sort(read.begin(), read.end(), [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  takeRasAnswers(job, listing.ras_answers, read);

  dropForeignRanks(job, read);
  if (suspected) keepNewestWarning(job, read);
  admitRanks(job, read);
  splitProcessesIntoGpuRanks(job);
  findWorldSize(job, listing.ranks.empty() ? -1 : *listing.ranks.rbegin());
  findMissingAndPartial(job);
  placeMissingRanks(job);
  checkClockSkew(job);
  if (!job.trigger_problem.empty()) job.problems.push_back(job.trigger_problem);
  return job;
}

}  // namespace hangwatch::verdict
