#pragma once
// Communication hang: the connection(s) with the least progress on each ring channel.
// A connection X->Y is seen from both ends: Y's recv record reads X's tail (steps
// delivered), X's send record reads Y's head (steps consumed); its progress is the
// smaller of the two, counted from where the collective began (base_step). One minimal connection names a link; when the minimal ones are
// exactly the connections into and out of one rank, that rank is named instead.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/forensics_dump.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

struct ChannelFinding {
  int channel = 0;
  std::optional<Link> link;    // global ranks
  std::optional<int> rank;     // global rank
  uint64_t least_progress = 0;
  uint64_t next_least = 0;     // the least progress among all other connections
  std::vector<Link> minimal;   // every connection at the least progress (global ranks)
  int connections = 0;         // connections seen on this channel
};

struct RingFinding {
  std::optional<Link> link;
  std::optional<int> rank;
  int channels_agree = 0;
  int channels_total = 0;
  std::vector<ChannelFinding> channels;
  std::vector<int> stalled_ranks;  // ranks whose device stopped inside the collective (records say `stalled`)
  std::string note;  // why nothing was named, when nothing was
};

class RingProgressAnalysis {
 public:
  // `to_global` maps a communicator rank to a global rank.
  explicit RingProgressAnalysis(std::function<int(int)> to_global) : to_global_(std::move(to_global)) {}

  void add(const RingProgress& record);
  // Only records of `comm` at `seq`; every record when seq is unset.
  RingFinding analyze(const std::string& comm, std::optional<uint64_t> seq) const;

 private:
  std::function<int(int)> to_global_;
  std::vector<RingProgress> records_;
};

}  // namespace hangwatch::verdict
