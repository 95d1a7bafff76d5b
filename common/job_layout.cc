#include "hangwatch/common/job_layout.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

namespace hangwatch {
namespace {

// A job id becomes a directory name: keep it to one safe path component.
std::string sanitize(std::string id) {
  for (char& c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (id == "." || id == "..") id = "_";
  return id;
}

}  // namespace

std::string jobIdFromEnv(const EnvLookup& env) {
  for (const char* name : {"HANGWATCH_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid"}) {
    if (const char* v = envValue(env, name)) return sanitize(v);
  }
  return fmt::format("local-{}", getsid(0));
}

std::string jobDirFromEnv(const EnvLookup& env) {
  const char* root = envValue(env, "HANGWATCH_DUMP_DIR");
  std::string dir = root ? root : "./hangwatch-dumps";
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + jobIdFromEnv(env);
}

std::string triggerPath(const std::string& job_dir) { return job_dir + "/TRIGGER.json"; }

std::string triggerBeaconPath(const std::string& job_dir) { return job_dir + "/TRIGGER.beacon"; }

std::string suspectPath(const std::string& job_dir, int episode) {
  return episode <= 1 ? job_dir + "/SUSPECT.json" : fmt::format("{}/SUSPECT.{}.json", job_dir, episode);
}

std::string rankTag(int rank) {
  return fmt::format("r{:05d}", rank);
}

std::string watchdogSnapshotPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/ranks/{}.watchdog.json", job_dir, rankTag(rank));
}

std::string suspectSnapshotPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/ranks/{}.suspect.json", job_dir, rankTag(rank));
}

std::string forensicsDumpPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/ranks/{}.forensics.json", job_dir, rankTag(rank));
}

std::string rankStatePath(const std::string& job_dir, int rank) {
  return fmt::format("{}/ranks/{}.state.json", job_dir, rankTag(rank));
}

std::string forensicsDumpPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.forensics.json", job_dir, pid);
}

std::string watchdogSnapshotPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.watchdog.json", job_dir, pid);
}

std::string rasAnswerPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".ras.json";
}

std::string collectLogPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".collect.log";
}

std::string flightRecorderPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".flight_recorder.pkl";
}

std::string collectLogPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.collect.log", job_dir, pid);
}

std::string metricsPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/metrics/{}.jsonl", job_dir, rankTag(rank));
}

std::string timelinePath(const std::string& job_dir, int rank) {
  return fmt::format("{}/timeline/{}.json", job_dir, rankTag(rank));
}

std::string reportDir(const std::string& job_dir) { return job_dir + "/report"; }
std::string ranksDir(const std::string& job_dir) { return job_dir + "/ranks"; }
std::string metricsDir(const std::string& job_dir) { return job_dir + "/metrics"; }
std::string timelineDir(const std::string& job_dir) { return job_dir + "/timeline"; }
std::string nodesDir(const std::string& job_dir) { return job_dir + "/nodes"; }

std::string nodeSummaryPath(const std::string& job_dir, const std::string& host) {
  std::string name = host.empty() ? std::string("unknown-host") : host;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  if (name[0] == '.') name[0] = '_';
  return nodesDir(job_dir) + "/" + name + ".json";
}

std::optional<RankFile> parseRankFileName(std::string_view name) {
  static constexpr std::pair<std::string_view, RankFileKind> kSuffixes[] = {
      {".watchdog.json", RankFileKind::kWatchdogSnapshot}, {".forensics.json", RankFileKind::kForensicsDump},
      {".suspect.json", RankFileKind::kSuspectSnapshot},    {".ras.json", RankFileKind::kRasAnswer},
      {".state.json", RankFileKind::kRankState},           {".jsonl", RankFileKind::kMetrics},
      {".json", RankFileKind::kTimeline}};
  if (name.size() < 2 || name[0] != 'r') return std::nullopt;
  size_t digits = 1;
  int rank = 0;
  while (digits < name.size() && digits <= 9 && name[digits] >= '0' && name[digits] <= '9')
    rank = rank * 10 + (name[digits++] - '0');
  if (digits == 1) return std::nullopt;
  const std::string_view rest = name.substr(digits);
  for (const auto& [suffix, kind] : kSuffixes)
    if (rest == suffix) return RankFile{rank, kind};
  return std::nullopt;
}

bool isDumpByHandName(std::string_view name) {
  return name.size() > 1 && name[0] == 'p' && name.ends_with(".forensics.json");
}

}  // namespace hangwatch
