#pragma once
// Everything `forensics report` read from one job directory (DESIGN.md §4), rank by rank.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/stack_table.h"
#include "hangwatch/common/trigger_record.h"
#include "hangwatch/verdict/rank_summary.h"

namespace hangwatch::verdict {

// A rank whose dump is there only in part, and why.
struct PartialRank {
  int rank = -1;
  std::string missing;  // "watchdog snapshot" or "forensics dump"
  std::string reason;   // "no file", "truncated or corrupt JSON: ...", "collector reported: ..."
};

// Which launch of the job the report is about (common/attempt.h); 1 of 1 for a job that never restarted.
struct AttemptInfo {
  std::string name;
  int number = 1;  // oldest first
  int count = 1;
  std::optional<int> restart;  // the launcher's restart or requeue count
  double started_unix_s = 0;   // 0: unknown (a folder without ATTEMPT.json)
};

// What the job folder holds (DESIGN.md §5 `stage`): a hang (TRIGGER.json, full dumps), an
// early warning only (SUSPECT.json and the ranks' suspect snapshots), or neither.
enum class Stage { kNone, kSuspected, kHang };
const char* stageName(Stage s);

// The early warning a suspected report is about.
struct SuspectSummary {
  int episode = 0;               // the latest one (1: SUSPECT.json)
  std::vector<int> resumed;      // ranks that moved again since
  double resumed_after_s = 0;    // the longest of their waits
  std::vector<int> other_episode;  // ranks whose snapshot is of an earlier warning (not used)
};

// A rank with no dump whose process another rank of its node found gone, or alive but
// stopped (frozen by SIGSTOP or a job-control stop: it answers nothing) (rank_state.h).
struct ExitedRank {
  int rank = -1;
  int64_t pid = 0;
  std::string host;
  std::optional<int> device;  // its CUDA device, when its peer's board knew it
  int seen_by = -1;
  bool stopped = false;  // frozen, not gone
  std::string note;  // how the peer found it: killed or crashed, or ended with nothing pending
  // Ended on a SIGTERM it passed on with no GPU communication pending (RankState::exited_on_term):
  // the launcher ending the job, which it does once another rank failed; no cause of the hang.
  bool on_term = false;
};

// A member NCCL's RAS listed missing (unresponsive), in the answer asked for one rank's node:
// by its collector, or by `forensics ras` where no collector ran.
struct RasSighting {
  int asked_by = -1;
  RasMember member;
  bool collector_off = false;  // asked by `forensics ras` (HANGWATCH_COLLECT=0)
};

// Where a rank without a dump ran, from the last metrics window it wrote (a rank that died
// mid-run wrote some): who it was, not what it did at the hang.
struct RankPlace {
  std::string host;
  std::optional<int> device;
  int64_t pid = 0;
};

// A unique id a rank of an earlier launch of the job made (earlier_attempts.h).
struct IdMadeEarlier {
  std::string attempt;  // its folder's name, e.g. "restart-0"
  int rank = -1;
};

// One report rank of a job whose processes drive several GPUs each (gpu_ranks.h): the GPU's
// rank in the job's widest communicator, on its process.
struct GpuRank {
  int rank = -1;
  int process = -1;  // the launcher's rank of the process
  int64_t pid = 0;
  std::string host;
  int device = -1;
};

struct JobData {
  std::string job_dir;         // the attempt's folder
  AttemptInfo attempt;
  std::string job_id;          // the job most snapshots belong to
  int world_size = 0;          // from the snapshots; else highest rank seen + 1
  // When processes drive several GPUs each, the report's ranks are GPU ranks: world_size is
  // the widest communicator's, and this maps each answered GPU rank to its process. Empty
  // when every process drives one GPU (then ranks are the launcher's).
  std::vector<GpuRank> gpu_ranks;
  int processes = 0;           // processes that answered, when gpu_ranks is set
  std::string gpu_ranks_comm;  // the widest communicator's hash
  std::optional<int> trigger_process;  // TRIGGER.json's rank (the launcher's) when trigger->rank became a GPU rank
  bool world_size_known = false;
  Stage stage = Stage::kNone;
  SuspectSummary suspect;      // stage kSuspected only
  std::optional<TriggerRecord> trigger;  // TRIGGER.json, or in stage kSuspected the warning's record
  std::string trigger_problem;  // TRIGGER.json exists but could not be read
  std::vector<RankSummary> ranks;  // ranks that answered (at least one usable file), ascending
  // Every distinct thread stack of the job; RankSummary::threads hold ids into it. Shared so
  // JobData moves without invalidating them.
  std::shared_ptr<stackmerge::StackTable> stacks = std::make_shared<stackmerge::StackTable>();
  std::vector<int> ranks_missing;  // in [0, world_size): no usable file at all
  std::vector<ExitedRank> ranks_exited;  // of those, the ones whose process was seen gone
  std::map<int, RankPlace> ranks_placed;  // of the others, the ones whose metrics say where they ran
  std::vector<PartialRank> ranks_partial;
  std::vector<int> ranks_collecting;  // collectors still at work when the report was made
  // Ids this launch's ranks join with that a rank of an earlier launch made, by hash.
  std::map<std::string, IdMadeEarlier> ids_made_earlier;
  std::vector<std::string> problems;  // mixed jobs, clock skew, unreadable files: sentences
  // Said on stderr, never in the report (one made from node summaries equals one made from the
  // rank files): node summaries not used, and why.
  std::vector<std::string> read_notes;
  int node_summaries_used = 0;
  int metrics_files = 0;
  bool has_report_inputs() const { return trigger.has_value() || !ranks.empty(); }

  const RankSummary* find(int rank) const;
  const ExitedRank* exited(int rank) const;  // in ranks_exited, or null
};

}  // namespace hangwatch::verdict
