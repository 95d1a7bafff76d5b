#pragma once
// Turns what VerdictMaker decided into the sentences of a verdict: headline, evidence,
// next steps, the reason of an inconclusive one. Deciding stays in verdict_maker.cc.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/rank_set.h"
#include "hangwatch/verdict/graph_progress_analysis.h"
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/proxy_progress_analysis.h"
#include "hangwatch/verdict/ring_progress_analysis.h"
#include "hangwatch/verdict/sequence_analysis.h"
#include "hangwatch/verdict/verdict.h"
#include "hangwatch/verdict/wait_chain.h"

namespace hangwatch::verdict {

// Suspects as the report names them: "link 5 -> 6", "rank 3 (no snapshot)",
// "rank(s) 1-3 in ncclAllReduce", "ranks 4 and 5 (a link or GPU inside their node)".
enum class SuspectNote { kNone, kNoSnapshot, kDebugger, kProfiler };
Suspect linkSuspect(const Link& l);
Suspect rankSuspect(int rank, SuspectNote note = SuspectNote::kNone);
Suspect groupSuspect(const OpGroup& g);
Suspect nodeSuspect(const std::vector<int>& ranks);

// What a rank lacks beyond what its own summary says (RankSummary::lacking).
enum class MissingData { kNoDump, kStillCollecting, kNoCounter, kUnreadableCounter };
std::string missingDataText(MissingData m);  // DataGap::lacks
// Why a rank of the node the profiler narrowed the stop to is named: its kernel channels
// (`in_flight` of `total`, the latest started `started_s_ago`, < 0 unknown) never stopped.
std::string threadText(const std::string& name, int64_t tid);  // its name, else "tid 123"
// "attempt 2 of 3 (restart-1, started 2026-11-25 13:45:01 UTC); --attempt N reports another one"
std::string attemptText(const AttemptInfo& a);
// What the verdict says of one node: "culprit link 3 -> 4 leaves this node", "suspect: rank 5";
// empty for a node it does not involve. Shared by the text and HTML reports.
std::string nodeRole(const Verdict& v, const stackmerge::RankSet& node_ranks);
// What an early-warning report stands on, and whether the job moved again (stage kSuspected).
std::vector<std::string> suspectSentences(const JobData& job);

// Why a ring-progress decision named no culprit.
enum class RingGap {
  kNone,               // a link or a rank was named
  kMembersMissing,     // members left no snapshot
  kNarrowedByProfiler, // no ring records; the profiler's network connections narrow it to a node
  kNoRecords,          // no ring records at all
  kNamesNothing,       // records everywhere, and they name no single link or rank
};

// What a job directory without a usable rank dump holds.
enum class EmptyJob {
  kTriggeredNoDumps,  // TRIGGER.json, yet no rank dumped
  kNoSnapshotDumped,  // metrics windows or an unreadable TRIGGER.json, no rank dump
  kNothing,           // no trigger, no dumps, no metrics
};

// A GPU operation pending longer than its rank's watchdog timeout.
struct OverdueOp {
  int rank = -1;
  std::string op;
  double age_s = 0;
  double timeout_s = 0;
};

// A communicator some ranks are inside ncclCommInitRank* for (the snapshots' `joining`).
struct FormingComm {
  std::string comm;            // the hash comms[].hash would have
  int size = 0;                // members it waits for
  std::string call;            // "ncclCommInitRank", ...
  std::vector<int> waiting;    // global ranks inside the init
  double oldest_s = 0;         // the longest any of them has been inside
  std::vector<int> absent;     // its member ranks (in it) that no snapshot shows inside
  std::vector<int> outside;    // job ranks whose snapshot shows them outside it
  std::vector<int> exited;     // job ranks with no snapshot whose process a node peer found gone
  std::vector<int> silent;     // job ranks with no snapshot otherwise
  bool whole_job = false;      // size == the job's world size: every process is a member
};

// Ranks inside init with a unique id no rank of this launch made.
struct StrayInit {
  FormingComm comm;
  std::optional<IdMadeEarlier> earlier;  // the earlier launch's rank that made it, when known
};

// How NCCL's profiler events stand to the culprit the debugger's records name.
enum class ProfilerView {
  kSame,               // they name the same culprit
  kNarrowedAgrees,     // they put the stop among some nodes, the culprit's among them
  kNarrowedDisagrees,  // they put the stop elsewhere
};

// What the ring-progress decision established, before any wording.
struct RingFacts {
  const HangFocus& focus;
  const CommPositions& positions;
  RingFinding ring;        // the profiler's view stands in when the debugger named no one
  ProxyFinding proxy;
  std::vector<int> waiting;  // members waiting in the collective or its host call, sorted
  int ranks_with_records = 0;
  std::vector<int> with_records;  // the ranks that have a record of this communicator, sorted
  RingGap gap = RingGap::kNone;
  // Algorithms other than RING that the debugger saw the hung kernels run (the device
  // function in the backtrace, e.g. ncclDevFunc_AllReduce_Sum_f32_TREE_LL), sorted.
  std::vector<std::string> kernel_algorithms;
  // The debugger read every connection of the collective on its algorithm's own graph (a
  // tree's parents and children, PAT's peers): `ring` then holds what this graph named.
  std::optional<GraphFinding> graph;
};

class VerdictWording {
 public:
  VerdictWording(const JobData& job, const SequenceAnalysis& sequences) : job_(job), sequences_(sequences) {}

  // "rank 2 (host h, GPU 2, pid 7)", or on a communicator one process holds several ranks of,
  // "rank 2 (GPU 2 of pid 7 on host h)" with the communicator rank.
  std::string rankIn(const std::string& comm, int rank) const;

  // No decision from the dumps: why, and what to check.
  void noDumps(Verdict& v, EmptyJob what) const;
  void noSnapshots(Verdict& v) const;
  void nothingPending(Verdict& v) const;
  // Work pending outside any collective: the ranks whose operation outlived the timeout, if any.
  void outsideCollectives(Verdict& v, const std::vector<OverdueOp>& stuck) const;
  void notFormed(Verdict& v, const FormingComm& c) const;
  // Ranks inside init with ids no rank of this launch made; `own`, if any, the communicator made
  // here (by `makers`) that waits for the positions they hold.
  void idsDisagree(Verdict& v, const std::vector<StrayInit>& strays, const FormingComm* own,
                   const std::vector<int>& makers) const;
  // Ranks that never called the collective because they wait inside another communicator's init.
  void heldInInit(Verdict& v, const std::vector<int>& ranks) const;
  void exitedInside(Verdict& v, const HangFocus& f, const std::vector<ExitedRank>& exited) const;
  // `lost` left no file; NCCL on `seen_by` failed the communicator with ncclRemoteError.
  void lostByNetwork(Verdict& v, const HangFocus& f, int lost, const std::vector<int>& seen_by) const;
  // `lost` left no file; NCCL's RAS, asked by other ranks' collectors, lists it missing.
  void unansweredRas(Verdict& v, const HangFocus& f, int lost, const std::vector<RasSighting>& seen) const;
  // Ranks whose process a node peer found stopped and that dumped themselves once continued.
  void frozenThenContinued(Verdict& v, const std::vector<ExitedRank>& frozen) const;
  // Fewer than half the ranks answered; `named` when the verdict as it stands names a culprit.
  void tooFewAnswered(Verdict& v, int answered, bool named) const;
  // What every verdict notes about the data: who first detected the hang, who is missing.
  void dataNotes(Verdict& v) const;

  // Collective mismatch: who is in which collective; when missing ranks could turn the
  // majority, what it hinges on.
  void mismatch(Verdict& v, const HangFocus& f, const CommPositions& p, const std::vector<int>& odd) const;
  void mismatchUndecided(Verdict& v, const HangFocus& f, const CommPositions& p) const;
  void divergedEarlier(Verdict& v, const HangFocus& hang, const Divergence& d) const;
  // Non-communication hang: where the culprits stand and what the others wait in.
  void notInCollective(Verdict& v, const HangFocus& f, const CommPositions& p, const std::vector<int>& culprits,
                       const std::vector<int>& waiting) const;

  // Ranks that never called the focus collective because their GPU waits in one on another
  // communicator that waits, in turn, on this one (`held`: where the cycle closes).
  void waitsAcrossCommunicators(Verdict& v, const HangFocus& f, const CommPositions& p, const HangFocus& held) const;

  // Point-to-point hang: what each stuck stream waits on; the link named, or why none is.
  void p2pWaits(Verdict& v, const std::string& comm) const;
  void p2pLinkCulprit(Verdict& v, const std::string& comm, const ProxyFinding& pf) const;
  void p2pInconclusive(Verdict& v, const std::string& comm, const ProxyFinding& pf) const;
  // Where the waits end (wait_chain.h): a peer that never posted its half, in host code; a
  // send and its receive both running with nothing to tell the link from either GPU.
  void peerNeverPosted(Verdict& v, const ChainEnd& e, const std::vector<WaitChain::Owed>& owed) const;
  void p2pPairUndecided(Verdict& v, const ChainEnd& e, const ProxyFinding& pf, bool both_ways) const;
  // A transfer waits on a peer that left no file at all, and nothing says why. `candidates`: the
  // ranks the peer may be (e.rank alone when known); `silent`: the ranks without a snapshot that
  // did not end on a SIGTERM (the suspects).
  void peerLeftNothing(Verdict& v, const ChainEnd& e, const std::vector<int>& candidates,
                       const std::vector<int>& silent) const;
  // A transfer waits on a peer that ended on the launcher's SIGTERM (ExitedRank::on_term).
  void peerEndedOnTerm(Verdict& v, const ChainEnd& e, const std::vector<int>& silent) const;
  // The two ends of the waiting transfer issued different numbers of transfers to each other.
  void transfersDisagree(Verdict& v, const std::vector<std::string>& counts, std::optional<uint64_t> usual) const;
  // The data of a transfer left its sender and never arrived (wait_chain.h LostTransfer): said
  // as evidence, and, where nothing else decides, as the verdict's suspects.
  void lostInTransit(Verdict& v, const std::vector<LostTransfer>& lost, bool decided) const;
  void lostOnTheLink(Verdict& v, const LostTransfer& l, const RingConnection& waits) const;
  // Pipeline jobs: where each culprit sits (v.places), and a link that joins two stages.
  void pipelinePlaces(Verdict& v, const std::optional<Link>& link) const;

  // Ring progress: who waits where; then one of the three outcomes.
  void ringWaiting(Verdict& v, const RingFacts& facts) const;
  void ringProfilerView(Verdict& v, const RingFacts& facts, ProfilerView view) const;
  void ringLinkCulprit(Verdict& v, const RingFacts& facts) const;
  void ringRankCulprit(Verdict& v, const RingFacts& facts) const;
  void ringInconclusive(Verdict& v, const RingFacts& facts) const;
  // The debugger's records (rf) and NCCL's profiler events (pf) name different culprits.
  void sourcesDisagree(Verdict& v, const RingFinding& rf, const ProxyFinding& pf) const;
  // Hedges on a named ring culprit: connections no rank reported, whose end ranks (`dark`)
  // are v.lacking_data and whose suspects are v.suspects; a culprit rank without a snapshot.
  void unseenLinks(Verdict& v, const RingFinding& rf, const std::vector<int>& dark) const;
  void culpritWithoutSnapshot(Verdict& v, int rank) const;
  // The culprit link's end(s) `silent` wrote no snapshot: the link and they are suspects.
  void linkEndSilent(Verdict& v, const Link& link, const std::vector<int>& silent) const;
  void linkReceiverFinished(Verdict& v, const Link& link) const;
  // NCCL's Coll events show another algorithm than RING since the stuck collective was
  // issued; `hedged`: the ring-shaped culprit was made a suspect.
  void otherAlgorithms(Verdict& v, const RingFacts& facts, bool hedged) const;
  // The culprit was read off the algorithm's own graph (facts.graph): what the waits show.
  void graphLinkCulprit(Verdict& v, const RingFacts& facts) const;
  void graphRankCulprit(Verdict& v, const RingFacts& facts) const;
  void graphRead(Verdict& v, const RingFacts& facts) const;
  // One sentence per culprit rank in v.where: the thread it stands in and its innermost frames.
  void whereCulpritsAre(Verdict& v) const;

 private:
  // "rank 5 (GPU 5 on host h)"; a communicator rank of a process that drives several devices says which.
  std::string who(const std::string& comm, int rank) const;
  // "GPU 3 on host h", or "GPU 3 of pid 7 on host h" for a communicator rank of a process that
  // drives several devices; the host alone for the drain advice.
  std::string gpuIn(const std::string& comm, int rank) const;
  std::string hostIn(const std::string& comm, int rank) const;
  std::string channels(const Verdict& v, const RingFacts& facts) const;
  void linkCulprit(Verdict& v, const HangFocus& f, const Link& l) const;
  void rankCulpritSteps(Verdict& v, int rank) const;
  std::string steps(const RingFinding& rf) const;

  const JobData& job_;
  const SequenceAnalysis& sequences_;
};

}  // namespace hangwatch::verdict
