#include "hangwatch/verdict/rank_dump_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hangwatch/forensics_dump_fast_reader.h"
#include "hangwatch/job_layout.h"

namespace hangwatch::verdict {
namespace {

// One read() into a buffer each loader thread reuses: the stream-based copy took a third
// of the report's time at 16,384 ranks. The text is out[0, size) and kFastReaderPadding
// zero bytes follow it, so simdjson reads it in place.
bool readWholeFile(const std::string& path, std::string& out, size_t& size) {
  constexpr size_t kPad = stackmerge::kFastReaderPadding;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const size_t expected = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  out.resize(expected + kPad);
  size_t got = 0;
  while (true) {
    if (got + kPad >= out.size()) out.resize(out.size() + 4096);  // the file grew, or fstat said 0
    ssize_t n = ::read(fd, out.data() + got, out.size() - kPad - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(got), out.end(), '\0');
  size = got;
  return true;
}

// Only what frame labels and the report use; drops raw native/Python frames and addresses.
ThreadStack compactThread(ThreadStack&& t) {
  ThreadStack c;
  c.tid = t.tid;
  c.name = std::move(t.name);
  c.state = std::move(t.state);
  c.frames.reserve(t.frames.size());
  for (StackFrame& f : t.frames) {
    StackFrame k;
    k.kind = f.kind;
    k.function = std::move(f.function);
    k.file = std::move(f.file);
    k.line = f.line;
    // frameLabel names an unknown native frame by its module.
    if (k.function.empty() || k.function == "??") k.module = std::move(f.module);
    c.frames.push_back(std::move(k));
  }
  return c;
}

std::string parseProblem(const nlohmann::json& j, std::string_view text) {
  if (text.empty()) return "empty file";
  if (j.is_discarded()) return "truncated or corrupt JSON (" + std::to_string(text.size()) + " bytes)";
  if (!j.is_object()) return "not a JSON object";
  return "";
}

}  // namespace

void RankDumpReader::addSnapshotText(RankSummary& s, std::string_view text) {
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
  s.has_snapshot = true;
  SnapshotIdentity& id = snap->identity;
  s.host = std::move(id.host);
  s.pid = id.pid;
  s.device = id.device;
  s.job_id = std::move(id.job_id);
  s.world_size = id.world_size;
  s.snapshot_time_unix_s = snap->time_unix_s;
  s.timeout_s = snap->timeout_s;
  s.detected_here = snap->detected_here;
  s.comms = std::move(snap->comms);
  for (SnapshotStream& st : snap->streams) {
    for (SnapshotPendingOp& op : st.pending) s.pending.push_back(std::move(op));
  }
  s.host_calls = std::move(snap->host_calls);
}

void RankDumpReader::addForensicsText(RankSummary& s, const std::string& text) {
  std::string padded = text;
  padded.resize(text.size() + stackmerge::kFastReaderPadding, '\0');
  addPaddedForensicsText(s, std::string_view(padded.data(), text.size()));
}

void RankDumpReader::addPaddedForensicsText(RankSummary& s, std::string_view text) {
  if (text.empty()) {
    s.forensics_problem = "empty file";
    return;
  }
  // No JSON document is built and the raw frames are skipped unread: 16,384 ranks' dumps
  // are ~2 GB of JSON, most of it raw frames the report drops.
  Expected<ForensicsDump> dump =
      stackmerge::forensicsDumpFromPaddedText(text, stackmerge::FastReadOptions{.skip_raw_frames = true});
  if (!dump) {
    s.forensics_problem = "truncated or corrupt JSON (" + std::to_string(text.size()) + " bytes): " + dump.error();
    return;
  }
  s.has_forensics = true;
  if (s.host.empty()) s.host = dump->host;
  if (s.pid == 0) s.pid = dump->pid;
  s.threads.reserve(dump->threads.size());
  for (ThreadStack& t : dump->threads) s.threads.push_back(compactThread(std::move(t)));
  s.ring_progress = std::move(dump->ring_progress);
  s.collector_errors = std::move(dump->errors);
  s.process_state = std::move(dump->process_state);
}

RankSummary RankDumpReader::read(const std::string& job_dir, int rank) {
  RankSummary s;
  s.rank = rank;
  thread_local std::string buffer;
  size_t size = 0;
  if (readWholeFile(watchdogSnapshotPath(job_dir, rank), buffer, size))
    addSnapshotText(s, std::string_view(buffer.data(), size));
  if (readWholeFile(forensicsDumpPath(job_dir, rank), buffer, size))
    addPaddedForensicsText(s, std::string_view(buffer.data(), size));
  return s;
}

}  // namespace hangwatch::verdict
