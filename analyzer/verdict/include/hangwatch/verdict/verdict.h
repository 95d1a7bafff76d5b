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

// Where a culprit rank stands: one thread, innermost frame first.
struct CulpritStack {
  int rank = -1;
  std::string thread;
  std::vector<std::string> frames;
};

struct Verdict {
  VerdictKind kind = VerdictKind::kInconclusive;
  std::string headline;                  // one sentence: what happened and who
  std::vector<int> culprit_ranks;        // global ranks
  std::optional<Link> culprit_link;      // global ranks
  std::string communicator;              // hash hex, empty when none
  std::optional<OpRef> op;
  std::vector<std::string> evidence;     // sentences an operator can act on
  std::vector<std::string> next_steps;
  std::string reason;                    // inconclusive: why no culprit could be named
  int channels_agree = 0;                // communication hang: channels naming the culprit
  int channels_total = 0;                // channels with ring progress
  std::vector<CulpritStack> where;
};

}  // namespace hangwatch::verdict
