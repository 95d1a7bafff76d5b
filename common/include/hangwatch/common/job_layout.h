#pragma once
// Where a job's dumps live (DESIGN.md §4, contract):
//   $HANGWATCH_DUMP_DIR/<job-id>/TRIGGER.json
//                               TRIGGER.beacon (the trigger and completion flag every node re-reads)
//                               ranks/r00007.watchdog.json, ranks/r00007.forensics.json,
//                               ranks/r00007.state.json (collecting / done)
//                               ranks/r00007.ras.json (NCCL's RAS, asked with the collector off)
//                               metrics/r00007.jsonl
//                               timeline/r00007.json
//                               report/
//                               ATTEMPT.json, attempts/<name>/... (a restarted job: attempt.h)
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "hangwatch/common/rank_identity.h"

namespace hangwatch {

// HANGWATCH_JOB_ID, else SLURM_JOB_ID, TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid,
// else "local-<session id>" (ranks started by one launcher on one host share a session).
std::string jobIdFromEnv(const EnvLookup& env = nullptr);

// $HANGWATCH_DUMP_DIR (default ./hangwatch-dumps) joined with the job id.
std::string jobDirFromEnv(const EnvLookup& env = nullptr);

std::string triggerPath(const std::string& job_dir);
// The early warning's record: SUSPECT.json for the first one, SUSPECT.<n>.json for the n-th.
std::string suspectPath(const std::string& job_dir, int episode = 1);
// Exists from the job's start and grows a line when the job triggers and when every rank's
// dumps are done: a file whose content changes is what NFS close-to-open keeps fresh.
std::string triggerBeaconPath(const std::string& job_dir);
// "r00007": five digits, more when the rank needs them.
std::string rankTag(int rank);
std::string watchdogSnapshotPath(const std::string& job_dir, int rank);
// ranks/rNNNNN.suspect.json: the rank's snapshot at the early warning (watchdog snapshot schema).
std::string suspectSnapshotPath(const std::string& job_dir, int rank);
std::string forensicsDumpPath(const std::string& job_dir, int rank);
std::string rankStatePath(const std::string& job_dir, int rank);
// ranks/rNNNNN.ras.json: NCCL's RAS asked for the rank's node by `forensics ras`, with the collector off.
std::string rasAnswerPath(const std::string& job_dir, int rank);
// A collection by hand without a rank: ranks/p<PID>.forensics.json.
std::string forensicsDumpPathForPid(const std::string& job_dir, pid_t pid);
// A watchdog that knows no rank yet (no launcher rank, no communicator): ranks/p<PID>.watchdog.json.
std::string watchdogSnapshotPathForPid(const std::string& job_dir, pid_t pid);
// The output of the collector a watchdog started: ranks/rNNNNN.collect.log, or
// ranks/p<PID>.collect.log without a rank.
std::string collectLogPath(const std::string& job_dir, int rank);
// PyTorch's Flight Recorder dump of the rank, as the collector found it on its node (a pickle).
std::string flightRecorderPath(const std::string& job_dir, int rank);
std::string collectLogPathForPid(const std::string& job_dir, pid_t pid);
std::string metricsPath(const std::string& job_dir, int rank);
std::string timelinePath(const std::string& job_dir, int rank);
std::string reportDir(const std::string& job_dir);
std::string ranksDir(const std::string& job_dir);
std::string metricsDir(const std::string& job_dir);
std::string timelineDir(const std::string& job_dir);
// nodes/<host>.json: a node's ranks merged by its last collector (node_summary.h); characters
// other than letters, digits, '.', '-' and '_' in the host name become '_'.
std::string nodesDir(const std::string& job_dir);
std::string nodeSummaryPath(const std::string& job_dir, const std::string& host);

// The files above named after a rank, recognised from their name alone.
enum class RankFileKind {
  kWatchdogSnapshot,
  kForensicsDump,
  kRankState,
  kMetrics,
  kTimeline,
  kSuspectSnapshot,
  kRasAnswer
};
struct RankFile {
  int rank = -1;
  RankFileKind kind = RankFileKind::kWatchdogSnapshot;
};
// "r00007.watchdog.json" -> {7, kWatchdogSnapshot}; nothing for other names (temporary
// files, p<PID> dumps, more than 9 digits).
std::optional<RankFile> parseRankFileName(std::string_view name);
// ranks/p<PID>.forensics.json: a collection by hand.
bool isDumpByHandName(std::string_view name);

}  // namespace hangwatch
