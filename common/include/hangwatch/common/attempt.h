#pragma once
// Attempts: launchers restart a hung job under the same id (torchrun's restarts, Slurm's
// requeues, a re-run under the same HANGWATCH_JOB_ID), so one job folder sees several launches.
// Each launch ("attempt") keeps its files apart, and none is ever triggered by an earlier one's.
//
// The ranks of one launch agree on their attempt without talking to each other:
//  - the launch key, from the launcher's environment: Slurm's step and requeue count, torchrun's
//    restart count, the MPI launcher's own launch id (PMIx namespace / Open MPI job id);
//  - time: a folder whose TRIGGER.json was written before this process started belongs to an
//    earlier launch (every rank of a launch starts before its own hang is detected).
// Layout: the first attempt of a job keeps DESIGN.md §4's folder (<job-dir>/TRIGGER.json, ranks/,
// metrics/, ...); each later one has the same layout in <job-dir>/attempts/<name>/. Every
// attempt's root holds ATTEMPT.json, created once (O_EXCL) by its first rank.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/schema/field_list.h"

namespace hangwatch {

// What every rank of one launch computes alike from its environment.
struct LaunchKey {
  std::string key;              // "step-0.requeue-1", "restart-2", "mpi-1224343553"; "" when none
  std::optional<int> restart;   // the launcher's restart or requeue count, where it keeps one
};

LaunchKey launchKeyFromEnv(const EnvLookup& env = nullptr);

// When this process started, wall clock (from /proc: the exec, not the library's first call).
double processStartUnixS();

// ATTEMPT.json, at the root of each attempt's folder.
struct AttemptRecord {
  int schema_version = 1;
  std::string job_id;
  std::string name;   // the launch key, or "run" without one; ".2", ".3" when the key was used before
  std::string key;
  std::optional<int> restart;
  double started_unix_s = 0;  // the creating rank's process start
  std::string host;
  int64_t pid = 0;
  std::optional<int> rank;
};

nlohmann::json toJson(const AttemptRecord& a);
Expected<AttemptRecord> attemptFromJson(const nlohmann::json& j);

std::string attemptRecordPath(const std::string& attempt_dir);
std::string attemptsDir(const std::string& job_dir);

// The folder of this rank's launch, claimed (ATTEMPT.json created) if it is the launch's first rank.
struct ClaimedAttempt {
  std::string dir;
  AttemptRecord record;
};
struct AttemptClaim {
  std::string job_dir;
  std::string job_id;
  LaunchKey launch;
  double started_unix_s = 0;
  std::string host;
  pid_t pid = 0;
  std::optional<int> rank;
};
Expected<ClaimedAttempt> claimAttempt(const AttemptClaim& claim);

// The attempts a job folder holds, oldest first. A job folder of a hangwatch without attempts (no
// ATTEMPT.json) is one attempt with no record.
struct AttemptEntry {
  std::string dir;
  std::optional<AttemptRecord> record;
  std::string name() const;
};
std::vector<AttemptEntry> listAttempts(const std::string& job_dir);

// The attempt `selector` names in `job_dir`: empty for the newest, "N" for the N-th (1 = oldest),
// else an attempt's name. Also accepts an attempt's own folder as `job_dir`.
struct ChosenAttempt {
  AttemptEntry entry;
  int number = 1;  // 1-based, oldest first
  int count = 1;
};
Expected<ChosenAttempt> chooseAttempt(const std::string& job_dir, const std::string& selector = "");

// A folder that holds a job's files (or its attempts): TRIGGER.json, SUSPECT.json, ATTEMPT.json,
// TRIGGER.beacon, ranks/, metrics/ or attempts/.
bool isJobFolder(const std::string& dir);

// The jobs in a dump root ($HANGWATCH_DUMP_DIR): its sub-folders that are job folders, newest
// first (by the start of their newest attempt, else by the folder's modification time).
struct JobInRoot {
  std::string dir;
  double newest_unix_s = 0;
  int attempts = 1;
};
std::vector<JobInRoot> jobsInDumpRoot(const std::string& root);

}  // namespace hangwatch

namespace hangwatch::schema {

template <>
struct Schema<AttemptRecord> {
  static constexpr const char* what = "ATTEMPT.json";
  static constexpr auto fields = std::tuple{
      field("schema_version", &AttemptRecord::schema_version, "attempt schema_version"),
      field("job_id", &AttemptRecord::job_id, "attempt job_id"),
      field("name", &AttemptRecord::name, "attempt name"),
      field("key", &AttemptRecord::key, "attempt key"),
      field("restart", &AttemptRecord::restart, "attempt restart"),
      field("started_unix_s", &AttemptRecord::started_unix_s, "attempt started_unix_s"),
      field("host", &AttemptRecord::host, "attempt host"),
      field("pid", &AttemptRecord::pid, "attempt pid"),
      field("rank", &AttemptRecord::rank, "attempt rank"),
  };
};

}  // namespace hangwatch::schema
