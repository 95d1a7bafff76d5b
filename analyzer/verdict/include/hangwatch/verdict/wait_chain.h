#pragma once
// Who waits on whom across communicators and point-to-point transfers, from the watchdog
// snapshots' pending operations (issue 45: pipeline jobs). A stream runs in order: an
// operation queued behind one the GPU has started does not run, so a rank is only *in* the
// operation its GPU runs (its head: the oldest pending operation that has started). A
// collective waits for every member that is not in it; a send or receive waits for its peer.
// Following those waits from the collective the hang surfaced in ends at:
//   - a rank with nothing running on its GPU whose peers need it: it is in host code;
//   - a collective every member is in: the hang is inside it (ring progress decides);
//   - a send and its receive both running: the hang is on that link;
//   - a wait already followed (a cycle), a rank without a snapshot, a kernel or copy that
//     never ends, or a communicator one process holds several ranks of: the walk stops.
// On a GPU job the same facts hold: the watchdog's start event of each operation says whether
// the GPU reached it, and the communicators' members come from every rank's snapshot.
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/pipeline_layout.h"
#include "hangwatch/verdict/sequence_analysis.h"

namespace hangwatch::verdict {

struct ChainEnd {
  enum class Kind { kStayed, kHostCode, kCollective, kP2pLink, kPeerLeftNothing, kStopped };
  Kind kind = Kind::kStayed;
  // kHostCode: the rank in host code. It never reached what `at` waits in: the collective
  // (`at.seq` set) it did not call, or the transfer on `at.comm` it did not post.
  // kPeerLeftNothing: the peer of the transfer `at` that left no snapshot at all; -1 when no
  // file names its global rank (`peer_in_comm`: its rank in `at.comm`).
  int rank = -1;
  int peer_in_comm = -1;
  int waiter = -1;  // kHostCode, kPeerLeftNothing through a transfer: the rank whose send or receive waits
  HangFocus at;     // kHostCode, kCollective, kPeerLeftNothing: where; kP2pLink: the communicator
  int from = -1;    // kP2pLink: the sender and receiver (global ranks)
  int to = -1;
  std::string why;  // kStopped: what stopped the walk
};

// A transfer whose data left its sender and never arrived: the sender finished its send, the
// receiver's group holding the receive still runs, and every other half of that group was done
// by its peer (issue 45: a dead link whose sends complete into the receiver's buffers).
struct LostTransfer {
  int from = -1;  // global ranks
  int to = -1;
  uint64_t sent_done = 0;      // the sender's sends to `to` that completed
  uint64_t received_done = 0;  // the receiver's receives from `from` that completed
};

class WaitChain {
 public:
  WaitChain(const JobData& job, const SequenceAnalysis& sequences) : job_(job), seq_(sequences) {}

  // The walk from the focus collective. kStayed when every member with a snapshot either is in
  // it, finished it, or never issued it with nothing running on its GPU (the rules that follow
  // handle those); else where the waits lead, with one sentence per hop in `at.moved`.
  ChainEnd fromCollective(const HangFocus& focus) const;
  // The walk from the oldest started transfer of the job, where no collective is pending.
  ChainEnd fromTransfers() const;

  // Every transfer overdue on its GPU (older than its rank's timeout) whose peer runs nothing:
  // the halves never posted, each as waiter, peer, communicator and the waiter's operation.
  struct Owed {
    int waiter = -1;
    int peer = -1;
    std::string comm;
    std::string op;  // the waiter's: "ncclSend" (the peer owes a receive) or "ncclRecv"
  };
  std::vector<Owed> owedTransfers() const;

  // The operation rank `rank`'s GPU runs: its oldest pending operation that started.
  const SnapshotPendingOp* head(int rank) const;

 private:
  struct Walk;
  ChainEnd follow(Walk& w, int rank, std::string how) const;
  ChainEnd throughCollective(Walk& w, int rank, const SnapshotPendingOp& op) const;
  ChainEnd throughTransfer(Walk& w, int rank, const SnapshotPendingOp& op) const;
  ChainEnd peerLeftNothing(const HangFocus& at, const SnapshotPendingOp& op, int waiter) const;
  bool peerDidItsHalf(int rank, int peer, const SnapshotPendingOp& op, uint64_t nth) const;
  ChainEnd throughRestOfGroup(Walk& w, int rank, const SnapshotPendingOp& first) const;
  std::vector<int> members(const std::string& comm) const;

  const PipelineLayout& layout() const;  // the transfer counts, indexed once per chain

  const JobData& job_;
  const SequenceAnalysis& seq_;
  mutable std::optional<PipelineLayout> layout_;
};

}  // namespace hangwatch::verdict
