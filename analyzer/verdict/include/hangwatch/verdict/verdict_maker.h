#pragma once
#include <map>
#include <set>
// Decides what hung and who is at fault (rules in analyzer/verdict/README.md), in this
// order: no hang, collective mismatch, non-communication hang (a rank never issued the
// collective the others wait in), communication hang (least ring progress), else inconclusive.
#include <vector>

#include "hangwatch/stackmerge/stack_classifier.h"
#include "hangwatch/verdict/graph_progress_analysis.h"
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/proxy_progress_analysis.h"
#include "hangwatch/verdict/ring_progress_analysis.h"
#include "hangwatch/verdict/sequence_analysis.h"
#include "hangwatch/verdict/verdict.h"
#include "hangwatch/verdict/verdict_wording.h"
#include "hangwatch/verdict/wait_chain.h"

namespace hangwatch::verdict {

class VerdictMaker {
 public:
  // `classes` are the stack classes of the ranks with forensics dumps, largest first.
  VerdictMaker(const JobData& job, const std::vector<stackmerge::StackClass>& classes)
      : job_(job), classes_(classes), sequences_(job), wording_(job, sequences_) {}

  Verdict decide() const;
  const SequenceAnalysis& sequences() const { return sequences_; }

 private:
  // The first rule that applies, before hedging for missing ranks.
  Verdict byRule() const;
  void hedgeTooFewAnswered(Verdict& v) const;
  Verdict noDumps() const;
  Verdict noSnapshots() const;
  Verdict outsideCollectives() const;
  // Ranks inside ncclCommInitRank* for a communicator some members never joined.
  std::optional<Verdict> notFormed() const;
  // Ranks inside init with a unique id no rank of this launch made, while a communicator of the
  // same size made here waits for the positions they hold: they were given another id.
  std::optional<Verdict> idsDisagree(const std::map<std::string, FormingComm>& forming,
                                     const std::map<std::string, std::set<int>>& positions_inside) const;
  bool insideInit(int rank) const;
  // A member of the focus communicator whose process is gone is the culprit.
  void blameExited(Verdict& v, const HangFocus& f, const CommPositions& p) const;
  void blameLostByNetwork(Verdict& v, const HangFocus& f, const CommPositions& p) const;
  void blameUnansweredRas(Verdict& v, const HangFocus& f, const CommPositions& p) const;
  void nameMissingMembers(Verdict& v, const HangFocus& f, const std::vector<int>& ranks) const;
  // The communicators of `s`'s RAS answer that are `f`'s, by NCCL's commHash or, where no
  // snapshot knew it, by size and every answering member's pid.
  std::vector<const RasComm*> rasCommsOf(const RankSummary& s, const HangFocus& f, int comm_size) const;
  void noteFrozenThenContinued(Verdict& v) const;
  Verdict nothingPending() const;
  Verdict mismatch(const HangFocus& f, const CommPositions& p) const;
  Verdict divergedEarlier(const HangFocus& f, const CommPositions& here, const Divergence& d) const;
  Verdict notInCollective(const HangFocus& f, const CommPositions& p, const std::vector<int>& culprits) const;
  Verdict waitsAcrossCommunicators(const HangFocus& f, const CommPositions& p, const HangFocus& held) const;
  Verdict fromRingProgress(const HangFocus& f, const CommPositions& p) const;
  // The ring-progress decision in steps: gather both sources, weigh them, name or hedge.
  RingFacts ringFacts(const HangFocus& f, const CommPositions& p) const;
  void fromGraph(RingFacts& facts, GraphFinding g) const;
  void weighProfiler(Verdict& v, const RingFacts& facts, bool profiler_named) const;
  void blameRingLink(Verdict& v, const RingFacts& facts) const;
  void ringUndecided(Verdict& v, RingFacts& facts) const;
  void hedgeRing(Verdict& v, const RingFacts& facts) const;
  void hedgeFinishedReceiver(Verdict& v, const RingFacts& facts) const;
  // NCCL ran another algorithm than RING since the stuck collective was issued: a culprit
  // only the ring's shape named (least ring progress) is a suspect; a link on the wire stays.
  void hedgeOtherAlgorithms(Verdict& v, const RingFacts& facts) const;
  void addCulpritStacks(Verdict& v) const;
  // What `rank` lacks for a decision on communicator `comm`.
  DataGap gapOf(int rank, const std::string& comm) const;
  // Ring connections neither end reported: the culprit may be one of them.
  void hedgeUnseenLinks(Verdict& v, const RingFinding& rf, const HangFocus& f) const;
  // Point-to-point operations older than the timeout: the communicator of the first, or "".
  std::string stuckP2pComm() const;
  // A point-to-point hang on `comm`: named from NCCL's profiler progress when it shows a link
  // on the wire, else inconclusive with what each stuck stream waits on.
  // `pair`: where the waits ended at a send and its receive both running (wait_chain.h).
  Verdict fromP2p(const std::string& comm, const ChainEnd* pair = nullptr) const;
  // Where the waits across communicators and transfers end (wait_chain.h).
  Verdict peerNeverPosted(const ChainEnd& e) const;
  Verdict peerLeftNothing(const ChainEnd& e) const;
  // A rank whose node peer found it ended on a SIGTERM it passed on with nothing pending.
  bool endedOnTerm(int rank) const;
  void placeInPipeline(Verdict& v) const;
  bool pendingTransfer(const std::string& comm, int rank, int peer, bool send) const;
  Verdict p2pPair(const ChainEnd& e) const;
  std::optional<Verdict> transfersDisagree(const ChainEnd& e) const;
  std::vector<LostTransfer> lostInTransit(const std::string& comm, int rank) const;
  uint64_t pendingTransfers(const std::string& comm, int rank, int peer, bool send) const;
  std::optional<RingConnection> receiverWaitsFor(const std::string& comm, int rank, int from) const;
  // The processes (global ranks) holding these ranks of a communicator shared by processes.
  std::vector<int> processesOf(const std::string& comm, const std::vector<int>& comm_ranks) const;
  // The debugger's records and NCCL's profiler events name different culprits.
  Verdict sourcesDisagree(Verdict v, const RingFinding& rf, const ProxyFinding& pf) const;
  // Ranks without a snapshot could outvote the group named odd one out.
  void hedgeMismatch(Verdict& v, const CommPositions& p, const HangFocus& f) const;

  const JobData& job_;
  const std::vector<stackmerge::StackClass>& classes_;
  SequenceAnalysis sequences_;
  VerdictWording wording_;
};

}  // namespace hangwatch::verdict
