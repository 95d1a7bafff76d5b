#include "hangwatch/forensics/cli/node_summary_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/common/child_process.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/collection_status.h"
#include "hangwatch/verdict/node_summaries.h"

namespace hangwatch::forensics {
namespace fs = std::filesystem;

namespace {

// A waiter never outlives this: the collectors' own bounds are 90 s.
constexpr double kLongestWaitS = 150;

struct NodeState {
  bool settled = true;          // every rank done, or past its deadline
  double latest_deadline = 0;   // of the ranks still collecting
};

NodeState nodeState(const std::string& job_dir, const std::vector<int>& ranks, double now) {
  NodeState n;
  for (int r : ranks) {
    Expected<RankState> s = readRankState(rankStatePath(job_dir, r));
    if (s && s->settled(now)) continue;
    n.settled = false;
    if (s) n.latest_deadline = std::max(n.latest_deadline, s->deadline_unix_s);
  }
  return n;
}

Expected<std::string> summarize(const std::string& job_dir, const std::string& host, const std::vector<int>& ranks) {
  NodeSummary s = verdict::NodeSummaryBuilder::build(job_dir, host, ranks, verdict::wallClockNow());
  Expected<std::string> path = verdict::NodeSummaryBuilder::write(job_dir, s);
  if (!path) return path;
  return fmt::format("{}: {} rank(s) covered{}, {} stack class(es)", *path, s.covers.size(),
                     s.lacks.empty() ? "" : fmt::format(", {} lacking", s.lacks.size()), s.classes.size());
}

std::string joinRanks(const std::vector<int>& ranks) {
  stackmerge::RankSet set;
  for (int r : ranks) set.insert(r);
  return set.toString();
}

// Every rank with a state file, by the host it names.
std::map<std::string, std::vector<int>> ranksByHost(const std::string& job_dir) {
  std::map<std::string, std::vector<int>> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(ranksDir(job_dir), ec)) {
    std::optional<RankFile> f = parseRankFileName(e.path().filename().string());
    if (!f || f->kind != RankFileKind::kRankState) continue;
    Expected<RankState> s = readRankState(e.path().string());
    if (s && !s->host.empty()) out[s->host].push_back(f->rank);
  }
  for (auto& [host, ranks] : out) std::sort(ranks.begin(), ranks.end());
  return out;
}

}  // namespace

// One waiter per node and job folder: a file in node-local shared memory, made with O_EXCL.
std::string nodeSummaryWaiterClaim(const std::string& job_dir, const std::string& host) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : fs::absolute(job_dir).lexically_normal().string() + "\n" + host)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return fmt::format("/dev/shm/hangwatch-{}-nodesum-{:016x}", ::getuid(), h);
}

std::string NodeSummaryCommand::usage() const {
  return "usage: forensics node-summary <job-dir> --ranks R [--host H] [--wait-until UNIX_S]\n"
         "       forensics node-summary <job-dir> --all\n"
         "\n"
         "Merges one node's rank files (ranks/rNNNNN.{watchdog,forensics,state}.json) into\n"
         "<job-dir>/nodes/<host>.json: each rank's record as `report` reads it, and the node's\n"
         "distinct thread stacks once, as a prefix tree. `report` then opens one file per node\n"
         "instead of three per rank, and reads from their own files the ranks a summary lacks\n"
         "(whose dumps were not done when it was written). The node's last collector writes it\n"
         "(`collect --node`); this command does it by hand, or for dumps collected without it.\n"
         "\n"
         "  --ranks R          the node's ranks, as ranges (\"0-7\" or \"8,9,12-15\")\n"
         "  --host H           the node's name (default: this host's)\n"
         "  --wait-until T     first wait (polling each second) until every one of those ranks is\n"
         "                     done or past its deadline, or until the wall-clock time T (Unix s)\n"
         "  --all              one summary per host, the ranks grouped by the host their state\n"
         "                     file names (ranks without a state file are left to their files)\n"
         "\n"
         "exit: 0 written; 1 a summary could not be written; 2 usage\n";
}

namespace {

// One summary per host, hosts in parallel: a synthetic job of 16,384 nodes is summarised in one run.
int summarizeAll(const std::string& job_dir) {
  const std::map<std::string, std::vector<int>> hosts = ranksByHost(job_dir);
  std::vector<std::pair<std::string, std::vector<int>>> work(hosts.begin(), hosts.end());
  std::vector<Expected<std::string>> said(work.size(), Error{"not written"});
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < work.size(); i = next.fetch_add(1))
      said[i] = summarize(job_dir, work[i].first, work[i].second);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  int bad = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    if (said[i]) {
      std::cout << "forensics node-summary: wrote " << *said[i] << "\n";
    } else {
      std::cerr << "forensics node-summary: " << work[i].first << ": " << said[i].error() << "\n";
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

// Waits (polling each second) until the node's ranks settle or `until`; true when the node's
// last collector wrote the summary meanwhile, so that nothing is left to do.
bool waitForTheLastCollector(const std::string& job_dir, const std::vector<int>& ranks, const std::string& host,
                             double until) {
  const double now = verdict::wallClockNow();
  const double stop = std::min(until, now + kLongestWaitS);
  while (!nodeState(job_dir, ranks, verdict::wallClockNow()).settled && verdict::wallClockNow() < stop)
    std::this_thread::sleep_for(std::chrono::seconds(1));
  struct stat st;
  return nodeState(job_dir, ranks, verdict::wallClockNow()).settled &&
         ::stat(nodeSummaryPath(job_dir, host).c_str(), &st) == 0 && st.st_mtime >= static_cast<time_t>(now);
}

}  // namespace

int NodeSummaryCommand::run(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << usage();
    return 0;
  }
  std::string job_dir, ranks_text, host, wait_text, claim;
  bool all = false;
  OptionCursor cur{args};
  while (!cur.done()) {
    Expected<bool> took = cur.take("--ranks", ranks_text);
    if (took && !*took) took = cur.take("--host", host);
    if (took && !*took) took = cur.take("--wait-until", wait_text);
    if (took && !*took) took = cur.take("--claim", claim);  // the waiter's claim, removed when done
    if (!took) return usageError(took.error());
    if (*took) continue;
    const std::string& a = args[cur.i++];
    if (a == "--all") {
      all = true;
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (job_dir.empty()) {
      job_dir = a;
    } else {
      return usageError("expected one <job-dir>, got also '" + a + "'");
    }
  }
  if (job_dir.empty()) return usageError("missing <job-dir>");
  if (all == !ranks_text.empty()) return usageError("give either --ranks or --all");
  if (all && (!host.empty() || !wait_text.empty())) return usageError("--all takes neither --host nor --wait-until");
  Expected<std::vector<int>> parsed = all ? Expected<std::vector<int>>(std::vector<int>{}) : parseRanks("--ranks", ranks_text);
  if (!parsed) return usageError(parsed.error());
  const std::vector<int> ranks = std::move(*parsed);
  std::error_code ec;
  if (!fs::is_directory(ranksDir(job_dir), ec)) {
    std::cerr << "forensics node-summary: " << job_dir << " has no ranks/ folder\n";
    return 1;
  }
  if (all) return summarizeAll(job_dir);
  if (host.empty()) host = hostName();
  if (!wait_text.empty()) {
    char* end = nullptr;
    const double until = std::strtod(wait_text.c_str(), &end);
    if (*end != '\0' || !(until >= 0)) return usageError("--wait-until wants a Unix time in seconds, got '" + wait_text + "'");
    if (waitForTheLastCollector(job_dir, ranks, host, until)) {
      if (!claim.empty() && claim.starts_with("/dev/shm/hangwatch-")) ::unlink(claim.c_str());
      std::cout << "forensics node-summary: " << nodeSummaryPath(job_dir, host) << " was written by the node's last "
                << "collector\n";
      return 0;
    }
  }
  Expected<std::string> said = summarize(job_dir, host, ranks);
  if (!claim.empty() && claim.starts_with("/dev/shm/hangwatch-")) ::unlink(claim.c_str());
  if (!said) {
    std::cerr << "forensics node-summary: " << said.error() << "\n";
    return 1;
  }
  std::cout << "forensics node-summary: wrote " << *said << "\n";
  return 0;
}

void summarizeNodeAfterCollect(const std::string& job_dir, const std::vector<int>& node_ranks, std::ostream& log) {
  const std::string host = hostName();
  const double now = verdict::wallClockNow();
  NodeState state = nodeState(job_dir, node_ranks, now);
  if (state.settled) {
    Expected<std::string> said = summarize(job_dir, host, node_ranks);
    if (said) log << "forensics collect: node summary " << *said << "\n";
    else log << "forensics collect: node summary not written: " << said.error() << "\n";
    return;
  }
  const std::string claim = nodeSummaryWaiterClaim(job_dir, host);
  const int fd = ::open(claim.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return;  // another collector of this node already waits
  if (fd >= 0) ::close(fd);
  const double until = std::min(now + kLongestWaitS, std::max(now, state.latest_deadline) + 1);
  ChildCommand command;
  std::error_code ec;
  command.exe = fs::read_symlink("/proc/self/exe", ec).string();
  command.args = {"node-summary", job_dir, "--ranks", joinRanks(node_ranks), "--host", host, "--wait-until",
                  fmt::format("{:.3f}", until)};
  if (fd >= 0) command.args.insert(command.args.end(), {"--claim", claim});
  command.output_path = "/dev/null";
  Expected<ChildProcess> child = ChildProcess::start(command);
  if (!child) {
    ::unlink(claim.c_str());
    log << "forensics collect: node summary waiter not started: " << child.error() << "\n";
    return;
  }
  log << fmt::format("forensics collect: rank(s) of this node still collecting; pid {} writes the node summary when "
                     "they are done (by {:.0f})\n",
                     child->pid(), until);
}

}  // namespace hangwatch::forensics
