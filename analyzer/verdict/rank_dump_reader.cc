#include "hangwatch/verdict/rank_dump_reader.h"

#include <algorithm>

#include <charconv>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/common/nccl_info_lines.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"
#include "hangwatch/verdict/dump_file_text.h"

namespace hangwatch::verdict {
namespace {

std::string parseProblem(const nlohmann::json& j, std::string_view text) {
  if (text.empty()) return "empty file";
  if (j.is_discarded()) return fmt::format("truncated or corrupt JSON ({} bytes)", text.size());
  if (!j.is_object()) return "not a JSON object";
  return "";
}

// Keeps the profiler's view of the communicators this rank has a collective pending on.
void takeProgress(RankSummary& s, const SnapshotProgress& p) {
  s.has_progress = true;
  std::set<uint64_t> wanted;
  for (const SnapshotPendingOp& op : s.pending) {
    if (op.comm.empty()) continue;
    for (const SnapshotComm& c : s.comms)
      if (c.hash == op.comm && !c.nccl_id.empty()) wanted.insert(ncclIdValue(c.nccl_id));
  }
  for (const SnapshotHostCall& h : s.host_calls) {
    for (const SnapshotComm& c : s.comms)
      if (!h.comm.empty() && c.hash == h.comm && !c.nccl_id.empty()) wanted.insert(ncclIdValue(c.nccl_id));
  }
  for (const SnapshotProxyConnection& c : p.connections) {
    const uint64_t id = ncclIdValue(c.nccl_comm);
    if (!wanted.count(id) || (c.dir != "send" && c.dir != "recv")) continue;
    ProxyEnd e;
    e.nccl_comm = id;
    e.comm_rank = c.rank;
    e.comm_size = c.nranks;
    e.peer = c.peer;
    e.channel = c.channel;
    e.send = c.dir == "send";
    e.steps = c.steps;
    e.ops = c.ops;
    e.ops_done = c.ops_done;
    e.untracked_ops = c.untracked_ops;
    for (int i = 0; i < kSnapshotProxyStages; ++i)
      e.moved_s_ago[i] = c.moved_s_ago[i] ? static_cast<float>(*c.moved_s_ago[i]) : -1.0f;
    s.proxy_ends.push_back(e);
  }
  for (const SnapshotKernelChannel& k : p.kernel_channels) {
    const uint64_t id = ncclIdValue(k.nccl_comm);
    if (wanted.count(id))
      s.kernel_channels.push_back(
          {id, k.channel, k.started, k.stopped, k.started_s_ago ? static_cast<float>(*k.started_s_ago) : -1.0f});
  }
  for (const SnapshotCollAlgorithm& a : p.algorithms) {
    const uint64_t id = ncclIdValue(a.nccl_comm);
    if (wanted.count(id))
      s.algorithms.push_back({id, a.algo, a.launched, a.last_s_ago ? static_cast<float>(*a.last_s_ago) : -1.0f});
  }
}

void takeSnapshot(RankSummary& s, WatchdogSnapshot&& snap) {
  s.has_snapshot = true;
  SnapshotIdentity& id = snap.identity;
  s.host = std::move(id.host);
  s.pid = id.pid;
  s.device = id.device;
  s.job_id = std::move(id.job_id);
  s.world_size = id.world_size;
  s.snapshot_time_unix_s = snap.time_unix_s;
  s.timeout_s = snap.timeout_s;
  s.detected_here = snap.detected_here;
  s.comms = std::move(snap.comms);
  for (SnapshotStream& st : snap.streams) {
    for (SnapshotPendingOp& op : st.pending) {
      if (!op.device) op.device = st.device;
      s.pending.push_back(std::move(op));
    }
  }
  s.host_calls = std::move(snap.host_calls);
  s.unique_ids_made = std::move(snap.unique_ids_made);
  if (snap.progress) takeProgress(s, *snap.progress);
  s.suspect = snap.suspect;
  if (snap.nccl_log) {
    s.nccl_net = parseNcclInfoLines(snap.nccl_log->lines);
    s.nccl_net->unread = std::move(snap.nccl_log->unread);
    s.nccl_net->lines_dropped = snap.nccl_log->lines_dropped + (snap.nccl_log->truncated ? 1 : 0);
  }
}

}  // namespace

uint64_t ncclIdValue(const std::string& hex) {
  uint64_t v = 0;
  if (hex.empty() || hex.size() > 16) return 0;
  auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
  return ec == std::errc() && end == hex.data() + hex.size() ? v : 0;
}

void RankDumpReader::addSnapshotText(RankSummary& s, std::string_view text) {
  std::string padded(text);
  padded.resize(text.size() + dumpio::kFastReaderPadding, '\0');
  addPaddedSnapshotText(s, std::string_view(padded.data(), text.size()));
}

void RankDumpReader::addPaddedSnapshotText(RankSummary& s, std::string_view text) {
  // simdjson first; a file it refuses goes through nlohmann, whose parse errors word the
  // problem note (both readers take and refuse the same snapshots).
  Expected<WatchdogSnapshot> fast =
      dumpio::watchdogSnapshotFromPaddedText(text, dumpio::SnapshotReadOptions{.require_identity = true});
  if (fast) {
    takeSnapshot(s, std::move(*fast));
    return;
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  s.snapshot_problem = parseProblem(j, text);
  if (!s.snapshot_problem.empty()) return;
  // Without an identity object it is not a snapshot the watchdog wrote.
  auto identity = j.find("identity");
  if (identity == j.end() || !identity->is_object()) {
    s.snapshot_problem = "not a watchdog snapshot: no identity object";
    return;
  }
  Expected<WatchdogSnapshot> snap = watchdogSnapshotFromJson(j);
  if (!snap) {
    s.snapshot_problem = "unreadable snapshot: " + snap.error();
    return;
  }
  takeSnapshot(s, std::move(*snap));
}

void RankDumpReader::addForensicsText(RankSummary& s, const std::string& text, stackmerge::StackTable& stacks) {
  std::string padded = text;
  padded.resize(text.size() + dumpio::kFastReaderPadding, '\0');
  addPaddedForensicsText(s, std::string_view(padded.data(), text.size()), stacks);
}

void RankDumpReader::addPaddedForensicsText(RankSummary& s, std::string_view text, stackmerge::StackTable& stacks) {
  if (text.empty()) {
    s.forensics_problem = "empty file";
    return;
  }
  // No JSON document is built, the raw frames are skipped unread and the merged ones go
  // straight into the job's stack table: 16,384 ranks' dumps are ~2 GB of JSON, mostly frames.
  thread_local std::vector<uint32_t> stack_ids;
  Expected<ForensicsDump> dump = dumpio::forensicsDumpFromPaddedText(
      text, dumpio::FastReadOptions{.skip_raw_frames = true, .stacks = &stacks, .stack_ids = &stack_ids});
  if (!dump) {
    s.forensics_problem = fmt::format("truncated or corrupt JSON ({} bytes): {}", text.size(), dump.error());
    return;
  }
  s.has_forensics = true;
  if (s.host.empty()) s.host = dump->host;
  if (s.pid == 0) s.pid = dump->pid;
  s.threads.reserve(dump->threads.size());
  for (size_t i = 0; i < dump->threads.size() && i < stack_ids.size(); ++i) {
    ThreadStack& t = dump->threads[i];
    s.threads.push_back({t.tid, std::move(t.name), stack_ids[i]});
  }
  s.ring_progress = std::move(dump->ring_progress);
  s.collector_errors = std::move(dump->errors);
  s.process_state = std::move(dump->process_state);
  s.target_exited_during = std::move(dump->target_exited_during);
  s.ras = std::move(dump->ras);
}

// A ring record names its communicator by the watchdog's hash where the reader could compute
// it, and always by NCCL's own id where it saw one. The reader computes the hash of an
// ncclUniqueId; a communicator made by ncclCommSplit (or shrunk) has none, and the watchdog
// hashes it from its parent (nccl_interposers.cc, childHash). Such records, and those a reader
// gave no hash, are tied to the snapshot's communicator through its nccl_id.
namespace {
void joinRingRecords(RankSummary& s) {
  for (RingProgress& r : s.ring_progress) {
    if (r.nccl_comm.empty()) continue;
    const bool known = !r.comm.empty() && std::any_of(s.comms.begin(), s.comms.end(),
                                                      [&](const SnapshotComm& c) { return c.hash == r.comm; });
    if (known) continue;
    for (const SnapshotComm& c : s.comms)
      if (c.nccl_id == r.nccl_comm) r.comm = c.hash;
  }
}
}  // namespace

RankSummary RankDumpReader::read(const std::string& job_dir, int rank, stackmerge::StackTable& stacks,
                                 Stage stage) {
  RankSummary s;
  s.rank = rank;
  thread_local DumpFileText file;
  if (stage == Stage::kSuspected) {
    // An early warning: the snapshot taken then, and nothing else (no debugger ran).
    if (file.open(suspectSnapshotPath(job_dir, rank))) addPaddedSnapshotText(s, file.text());
    return s;
  }
  if (file.open(watchdogSnapshotPath(job_dir, rank))) addPaddedSnapshotText(s, file.text());
  if (file.open(forensicsDumpPath(job_dir, rank))) addPaddedForensicsText(s, file.text(), stacks);
  joinRingRecords(s);
  if (Expected<RankState> state = readRankState(rankStatePath(job_dir, rank))) s.state = std::move(*state);
  return s;
}

}  // namespace hangwatch::verdict
