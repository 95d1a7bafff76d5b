#include "hangwatch/job_layout.h"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

namespace hangwatch {
namespace {

const char* lookup(const EnvLookup& env, const char* name) {
  const char* v = env ? env(name) : std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

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
    if (const char* v = lookup(env, name)) return sanitize(v);
  }
  return fmt::format("local-{}", getsid(0));
}

std::string jobDirFromEnv(const EnvLookup& env) {
  const char* root = lookup(env, "HANGWATCH_DUMP_DIR");
  std::string dir = root ? root : "./hangwatch-dumps";
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + jobIdFromEnv(env);
}

std::string triggerPath(const std::string& job_dir) { return job_dir + "/TRIGGER.json"; }

std::string triggerBeaconPath(const std::string& job_dir) { return job_dir + "/TRIGGER.beacon"; }

std::string rankTag(int rank) {
  return fmt::format("r{:05d}", rank);
}

std::string watchdogSnapshotPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".watchdog.json";
}

std::string forensicsDumpPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".forensics.json";
}

std::string rankStatePath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".state.json";
}

std::string forensicsDumpPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.forensics.json", job_dir, pid);
}

std::string watchdogSnapshotPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.watchdog.json", job_dir, pid);
}

std::string collectLogPath(const std::string& job_dir, int rank) {
  return job_dir + "/ranks/" + rankTag(rank) + ".collect.log";
}

std::string collectLogPathForPid(const std::string& job_dir, pid_t pid) {
  return fmt::format("{}/ranks/p{}.collect.log", job_dir, pid);
}

std::string metricsPath(const std::string& job_dir, int rank) {
  return job_dir + "/metrics/" + rankTag(rank) + ".jsonl";
}

std::string reportDir(const std::string& job_dir) { return job_dir + "/report"; }

}  // namespace hangwatch
