#include "hangwatch/forensics/flight_recorder_copy.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/forensics/proc_snapshot.h"

namespace hangwatch::forensics {
namespace {

constexpr size_t kMaxBytes = size_t{64} << 20;

std::string value(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// Where PyTorch writes the rank's dump, or why there is none to look for.
Expected<std::string> dumpPathOf(pid_t pid) {
  const auto env = readProcEnvironment(pid);
  if (env.empty()) return Error{fmt::format("skipped: the environment of process {} is not readable", pid)};
  std::string buffer = value(env, "TORCH_FR_BUFFER_SIZE");
  if (buffer.empty()) buffer = value(env, "TORCH_NCCL_TRACE_BUFFER_SIZE");
  if (buffer == "0") return Error{"skipped: Flight Recorder is off (its buffer size is 0)"};
  std::string prefix = value(env, "TORCH_FR_DUMP_TEMP_FILE");
  if (prefix.empty()) prefix = value(env, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
  if (prefix.empty()) prefix = "/tmp/nccl_trace_rank_";
  const std::string rank = value(env, "RANK");
  if (rank.empty()) return Error{"skipped: no RANK in the process's environment to name its Flight Recorder file"};
  return prefix + rank;
}

}  // namespace

void copyFlightRecorder(pid_t pid, const std::string& job_dir, int rank, ForensicsDump& dump) {
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](bool ok, std::string error) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    dump.phases.push_back({"flight_recorder", s, ok, std::move(error)});
  };
  Expected<std::string> path = dumpPathOf(pid);
  if (!path) return finish(true, path.error());
  struct stat file {}, process {};
  if (::stat(path->c_str(), &file) != 0)
    return finish(true, fmt::format("skipped: no Flight Recorder dump at {} (PyTorch writes it at its own timeout)", *path));
  if (::stat(fmt::format("/proc/{}", pid).c_str(), &process) == 0 && file.st_mtime < process.st_mtime)
    return finish(true, fmt::format("skipped: {} predates this process (an earlier job's)", *path));
  if (static_cast<size_t>(file.st_size) > kMaxBytes)
    return finish(false, fmt::format("{} is {} bytes, over the {} MiB kept", *path, file.st_size, kMaxBytes >> 20));
  std::ifstream in(*path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) return finish(false, fmt::format("{}: not readable", *path));
  if (auto w = writeFileAtomically(flightRecorderPath(job_dir, rank), bytes.str()); !w)
    return finish(false, w.error());
  finish(true, "");
}

}  // namespace hangwatch::forensics
