#include "hangwatch/verdict/flight_recorder_evidence.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/common/flight_recorder.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/trigger_record.h"

namespace hangwatch::verdict {
namespace {

constexpr off_t kMaxBytes = off_t{64} << 20;
constexpr size_t kMaxListed = 4;

std::optional<FlightRecorderDump> readDump(const std::string& path, std::vector<std::string>& problems) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  if (st.st_size > kMaxBytes) {
    problems.push_back(fmt::format("{} is over {} MiB: not read", path, kMaxBytes >> 20));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto dump = flightRecorderFromPickle(bytes.str());
  if (!dump) {
    problems.push_back(fmt::format("{}: {}", path, dump.error()));
    return std::nullopt;
  }
  return std::move(*dump);
}

// "ncclAllReduce" -> "allreduce": Flight Recorder's profiling names say "nccl:all_reduce",
// "nccl:_allgather_base", "nccl:reduce_scatter_tensor_coalesced", ...
std::string squashed(std::string_view name) {
  std::string out;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool sameOperation(const FlightRecorderEntry& e, const std::string& nccl_op) {
  std::string want = squashed(nccl_op);
  if (want.rfind("nccl", 0) == 0) want.erase(0, 4);
  const std::string have = squashed(e.profiling_name.substr(e.profiling_name.find(':') + 1));
  return !want.empty() && have.find(want) != std::string::npos;
}

// The first frame of the user's own code (outside torch), else the innermost.
std::string callSite(const FlightRecorderEntry& e) {
  if (e.frames.empty()) return "";
  auto own = std::find_if(e.frames.begin(), e.frames.end(),
                          [](const FlightRecorderFrame& f) { return f.filename.find("/torch/") == std::string::npos; });
  const FlightRecorderFrame& f = own != e.frames.end() ? *own : e.frames.front();
  const size_t slash = f.filename.rfind('/');
  return fmt::format("{}:{} in {}", slash == std::string::npos ? f.filename : f.filename.substr(slash + 1), f.line, f.name);
}

struct Pending {
  std::string pg_id;
  int64_t seq = 0;
  friend bool operator<(const Pending& a, const Pending& b) { return std::tie(a.pg_id, a.seq) < std::tie(b.pg_id, b.seq); }
};

}  // namespace

void addFlightRecorderEvidence(Verdict& v, const JobData& job) {
  if (!v.op || job.job_dir.empty()) return;
  std::map<int, FlightRecorderDump> dumps;
  std::vector<std::string> problems;
  for (const RankSummary& s : job.ranks)
    if (auto d = readDump(flightRecorderPath(job.job_dir, s.rank), problems)) dumps.emplace(s.rank, std::move(*d));
  for (const std::string& p : problems) v.evidence.push_back("Flight Recorder dump not used: " + p + ".");
  if (dumps.empty()) return;

  // Per rank, its oldest entry of the stuck operation that did not complete, of the stuck
  // operation's size where TRIGGER.json says it (Flight Recorder's sequence numbers count the
  // process group's collectives, not NCCL's operations: coalesced groups differ).
  std::optional<uint64_t> bytes;
  if (job.trigger && job.trigger->stuck_op && job.trigger->stuck_op->op == v.op->name) bytes = job.trigger->stuck_op->bytes;
  auto sized = [&](const FlightRecorderEntry& e) {
    const int per = flightRecorderDtypeBytes(e.input_dtype);
    return !bytes || *bytes == 0 || per == 0 || static_cast<uint64_t>(e.input_numel) * per == *bytes;
  };
  std::map<Pending, std::vector<int>> pending;
  std::map<Pending, const FlightRecorderEntry*> example;
  for (const auto& [rank, d] : dumps) {
    for (const FlightRecorderEntry& e : d.entries) {
      if (e.state == "completed" || e.is_p2p || !sameOperation(e, v.op->name) || !sized(e)) continue;
      Pending key{e.pg_id, e.collective_seq_id};
      pending[key].push_back(rank);
      example.emplace(key, &e);
      break;
    }
  }
  if (pending.empty()) {
    v.evidence.push_back(fmt::format("PyTorch's Flight Recorder (dumps of {} rank(s)) holds no pending {}{}.",
                                     dumps.size(), v.op->name, bytes ? fmt::format(" of {} bytes", *bytes) : ""));
    return;
  }
  std::vector<std::string> said;
  for (const auto& [key, ranks] : pending) {
    if (said.size() == kMaxListed) break;
    const FlightRecorderEntry& e = *example.at(key);
    const FlightRecorderDump& d = dumps.at(ranks.front());
    auto g = d.groups.find(key.pg_id);
    const std::string members = g != d.groups.end() && !g->second.ranks.empty() ? ", ranks " + g->second.ranks : "";
    said.push_back(fmt::format("on rank(s) {}, {} #{} of process group {} '{}'{} is {}{}", fmt::join(ranks, ","),
                               e.profiling_name, key.seq, e.pg_name.empty() ? key.pg_id : e.pg_name, e.pg_desc, members,
                               e.state,
                               callSite(e).empty() ? ", with no Python call site recorded (issued from C++, as DDP's "
                                                     "reducer does)"
                                                   : ", called from " + callSite(e)));
  }
  v.evidence.push_back(fmt::format("PyTorch's Flight Recorder: {}{}.", fmt::join(said, "; "),
                                   pending.size() > 1 ? " (the ranks' recorders disagree on which collective is pending)"
                                                      : ""));
  // A rank whose recorder shows it never enqueued the collective the others wait in: its
  // highest recorded sequence number of that process group is below it (entries count in
  // Flight Recorder's own numbering, so no other count is mixed in).
  const auto& [key, waiting] = *pending.begin();
  for (const auto& [rank, d] : dumps) {
    if (std::count(waiting.begin(), waiting.end(), rank)) continue;
    int64_t last = -1;
    std::string desc;
    for (const FlightRecorderEntry& e : d.entries)
      if (e.pg_id == key.pg_id && !e.is_p2p && e.collective_seq_id > last) last = e.collective_seq_id, desc = e.pg_desc;
    if (last >= 0 && last < key.seq)
      v.evidence.push_back(fmt::format("PyTorch's Flight Recorder on rank {} shows it never enqueued collective #{} of "
                                       "process group '{}' (the last it recorded: #{}).",
                                       rank, key.seq, desc, last));
  }
}

}  // namespace hangwatch::verdict
