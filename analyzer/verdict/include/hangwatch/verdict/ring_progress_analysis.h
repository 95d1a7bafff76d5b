#pragma once
// Communication hang: the connection(s) with the least progress on each ring channel.
// A connection X->Y is seen from both ends: Y's recv record reads X's tail (steps
// delivered), X's send record reads Y's head (steps consumed); its progress is the
// smaller of the two, counted from where the collective began (base_step). One minimal connection names a link; when the minimal ones are
// exactly the connections into and out of one rank, that rank is named instead.
// A connection whose two ends wait on each other (the receiver took every step the sender
// posted and waits for more; the sender waits for a clear-to-send the receiver already gave)
// lost a credit on the way: that link is named, whatever the least progress says (the
// sender, blocked, stops taking from its own prev and looks like a stopped rank).
// A connection neither end reported (both ranks lack ring progress) may hold less progress
// than any seen one: such connections are listed as unseen, and a finding is only as sure
// as the channel has none.
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
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
  bool credit_lost = false;    // `link` is named because its ends wait on each other
  // Ring connections no record reports; `to` is -1 where the ring order there is unknown.
  std::vector<Link> unseen;
};

struct RingFinding {
  std::optional<Link> link;
  std::optional<int> rank;
  int channels_agree = 0;
  int channels_total = 0;
  bool credit_lost = false;  // the named link's ends wait on each other (a lost clear-to-send)
  std::vector<ChannelFinding> channels;
  std::string note;  // why nothing was named, when nothing was
  std::vector<Link> unseen;      // every channel's unseen connections, each once
  std::vector<Link> least_seen;  // the least-progress connections of the channels that named nothing
};

// A connection whose receiver took every step its sender posted and waits for the next, while
// the sender waits for a clear-to-send for a slot the receiver already freed: the credit was
// lost on the link (both ends' records, as read).
bool clearToSendLost(const RingConnection& send_end, const RingConnection& recv_end);

class RingProgressAnalysis {
 public:
  // `to_global` maps a communicator rank to a global rank.
  explicit RingProgressAnalysis(std::function<int(int)> to_global) : to_global_(std::move(to_global)) {}

  // A record the caller keeps alive for the analysis's lifetime (the job's: 131,072 ranks'
  // records are not copied), or one the analysis keeps.
  void add(const RingProgress& record) { records_.push_back(&record); }
  void add(RingProgress&& record) { records_.push_back(&owned_.emplace_back(std::move(record))); }
  // Only records of `comm` at `seq`; every record when seq is unset. `comm_size` (0: from the
  // records) is how many ranks the ring has, so connections nobody reported can be found.
  RingFinding analyze(const std::string& comm, std::optional<uint64_t> seq, int comm_size = 0) const;

 private:
  std::function<int(int)> to_global_;
  std::deque<RingProgress> owned_;  // a deque never moves its elements
  std::vector<const RingProgress*> records_;
};

}  // namespace hangwatch::verdict
