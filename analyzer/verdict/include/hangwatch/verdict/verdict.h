#pragma once
// The decision `forensics report` makes about a job (DESIGN.md §5, contract fields).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hangwatch::verdict {

enum class VerdictKind { kCommunicationHang, kNonCommunicationHang, kCollectiveMismatch, kNoHang, kInconclusive };

// "communication-hang", ... as in the JSON contract.
const char* verdictKindName(VerdictKind k);

struct Link {
  int from = -1;
  int to = -1;
  friend bool operator==(const Link&, const Link&) = default;
};

struct OpRef {
  std::string name;
  std::optional<uint64_t> seq;
};

// A culprit the data at hand cannot rule out.
struct Suspect {
  std::vector<int> ranks;    // global ranks it involves
  std::optional<Link> link;  // a connection; `to` is -1 when the ring order there is unknown
  std::string text;          // "link 5 -> 6", "rank 3", "the link out of rank 4"
  std::vector<std::string> hosts;  // the nodes it involves, in the order of its ranks (filled by ReportBuilder)
};

// A rank whose data the decision needed and does not have.
struct DataGap {
  int rank = -1;
  std::string lacks;  // "no dump", "no ring progress (...)", "its dumps are still being collected"
};

// Where a culprit rank stands: one thread, innermost frame first.
struct CulpritStack {
  int rank = -1;
  std::string thread;
  std::vector<std::string> frames;
};

// The NIC at one end of a link between nodes: its NET connection's net device, as that end's
// NCCL host state says (read by the debugger phase), or as NCCL's INFO line at the
// connection's set-up printed it (kept by the watchdog).
struct LinkNic {
  int rank = -1;     // the end, as culprit_link names ranks
  bool sends = false;  // the link's sender (else its receiver)
  std::string host;
  int index = -1;       // NCCL's net device index
  std::string device;   // "mlx5_3"; empty when the reader could not name it
  std::optional<int> port;
  std::string source = "debugger";  // or "nccl-info"
};

// Where a culprit (or an end of a culprit or suspect link) sits in a pipeline job
// (pipeline_layout.h): its stage and the groups it is in.
struct RankPlaceInJob {
  int rank = -1;
  int stage = 0;
  int stages = 0;
  std::vector<int> stage_ranks;
  std::vector<std::vector<int>> groups;  // its other communicators' members (tensor / data parallel)
};

struct Verdict {
  VerdictKind kind = VerdictKind::kInconclusive;
  std::string headline;                  // one sentence: what happened and who
  std::vector<int> culprit_ranks;        // global ranks (processes)
  std::optional<Link> culprit_link;      // global ranks, or communicator ranks when link_in_comm_ranks
  // The communicator's ranks are not processes: one process drives several devices, each a
  // rank of it (single-process multi-device jobs). culprit_ranks then names the process(es).
  bool link_in_comm_ranks = false;
  std::vector<LinkNic> culprit_link_nics;  // the culprit link's NICs where it crosses nodes: sender's first
  std::string communicator;              // hash hex, empty when none
  std::optional<OpRef> op;
  std::vector<std::string> evidence;     // sentences an operator can act on
  std::vector<std::string> next_steps;
  std::string reason;                    // inconclusive: why no culprit could be named
  int channels_agree = 0;                // communication hang: channels naming the culprit
  int channels_total = 0;                // channels with ring progress
  std::vector<CulpritStack> where;
  // Where the ring progress behind a communication verdict came from: "debugger" (the
  // collector's ring records), "profiler" (NCCL's profiler events in the snapshots), "debugger
  // and profiler" (both, agreeing or not); empty when the verdict did not use ring progress.
  std::string source;
  // False when the deciding evidence touches ranks with no or partial data. Culprit fields are
  // then filled only if every possibility left names the same culprit; `suspects` lists them.
  bool confident = true;
  std::string hinges_on;  // what the verdict depends on that is missing; empty when confident
  std::vector<Suspect> suspects;
  std::vector<DataGap> lacking_data;
  std::vector<RankPlaceInJob> places;  // pipeline jobs only: each culprit's, or each link end's
};

}  // namespace hangwatch::verdict
