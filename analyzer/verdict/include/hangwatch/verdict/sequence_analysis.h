#pragma once
// Where each rank stands on one communicator, from the watchdog snapshots' sequence
// numbers and pending operations: who waits in the hung collective, who never issued it
// (non-communication hang), and who is in a different one at the same number (mismatch,
// the check PyTorch's Flight Recorder makes).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hangwatch/verdict/job_data.h"

namespace hangwatch::verdict {

// The collective the hang is in.
struct HangFocus {
  std::string comm;
  uint64_t seq = 0;
  std::string op;
  std::string source;  // "TRIGGER.json" or "pending operations"
  // How the focus moved from the collective most ranks wait in to one that holds a rank that
  // never called it (heldElsewhere), one sentence per move.
  std::vector<std::string> moved;
};

// Ranks that wait at the focus sequence number in one operation shape.
struct OpGroup {
  std::string op;
  uint64_t count = 0;
  std::string dtype;
  std::vector<int> ranks;
  std::optional<int> root;  // a rooted collective's root, where every group's is known
};

// The first position on a communicator where its members called different collectives (by
// name, count, dtype and root), from what each rank recorded issuing (its snapshot's last
// collectives per communicator, and its pending ones). NCCL compares none of these across
// ranks: a rank that runs one collective more, or one of another size, may finish it and go
// on, and its peers hang at a later position where every pending operation agrees.
struct Divergence {
  uint64_t seq = 0;
  std::vector<OpGroup> groups;  // two or more, largest first
  std::vector<int> unknown;     // members with a snapshot whose record of this position is gone
};

struct CommPositions {
  std::vector<OpGroup> groups;  // largest first; more than one is a mismatch
  std::vector<int> behind;      // never issued the focus collective: last issued < focus seq
  std::vector<int> in_host_call;  // a host thread blocked inside the focus collective's NCCL call
  // Issued the focus collective and it no longer pends: completed, perhaps with later ones
  // queued behind. On a GPU as here, a rank whose sends fit in its peer's buffers finishes a
  // collective its peers still wait in and runs ahead: that is no skipped collective.
  std::vector<int> finished;
  std::map<int, std::optional<uint64_t>> last_issued;  // global rank -> last issued seq
  std::map<int, std::optional<uint64_t>> last_completed;
  std::vector<int> members_missing;  // members with no snapshot (global ranks where known)
  int comm_size = 0;
};

class SequenceAnalysis {
 public:
  explicit SequenceAnalysis(const JobData& job);

  std::optional<HangFocus> focus() const;
  CommPositions positions(const HangFocus& focus) const;
  // Global rank of `comm_rank` on communicator `comm`; itself when unknown, and itself on a
  // communicator one process holds several ranks of (one process driving several devices):
  // there the verdict speaks in communicator ranks (sharedByProcess).
  int globalRank(const std::string& comm, int comm_rank) const;
  // Whether a snapshot names that member, elimination placed it, or the communicator is
  // world-sized; a member no snapshot names is a rank that left no snapshot (every snapshot
  // lists every communicator it holds).
  bool knowsGlobalRank(const std::string& comm, int comm_rank) const;
  // Ranks of [0, world size) with no snapshot (no file, or files without one), ascending.
  const std::vector<int>& ranksWithoutSnapshot() const { return without_snapshot_; }
  // The process holding `comm_rank` of such a communicator, and the device of that rank.
  bool sharedByProcess(const std::string& comm) const { return shared_.count(comm) > 0; }
  int commSize(const std::string& comm) const {
    auto s = sizes_.find(comm);
    return s == sizes_.end() ? 0 : s->second;
  }
  const SnapshotComm* commEntry(const std::string& comm, int comm_rank, const RankSummary** owner) const;
  // A rank that never called the focus collective because its GPU is stuck in an earlier
  // collective on another communicator: its stream runs in order, so the host that waits for
  // it (a synchronize, a full queue) never gets to the call. The other communicator's
  // collective, overdue on that rank (its age past the rank's own timeout), is where the hang
  // is; the longest overdue one when several are. Nothing when no rank of `behind` has one.
  std::optional<HangFocus> heldElsewhere(const HangFocus& focus, const std::vector<int>& behind) const;
  // The lowest position at or below `up_to` on `comm` where members called different
  // collectives; nothing when every record agrees.
  std::optional<Divergence> firstDivergence(const std::string& comm, uint64_t up_to) const;
  // Ranks with any pending operation or a blocked NCCL host call.
  std::vector<int> ranksWithPendingWork() const;

 private:
  const JobData& job_;
  std::map<std::string, std::map<int, int>> members_;  // comm hash -> comm rank -> global rank
  // Members no snapshot names, placed by elimination (the constructor): comm rank -> global rank.
  std::map<std::string, std::map<int, int>> inferred_;
  std::vector<int> without_snapshot_;
  std::map<std::string, int> sizes_;
  std::set<std::string> shared_;  // communicators a process holds several ranks of
};

}  // namespace hangwatch::verdict
