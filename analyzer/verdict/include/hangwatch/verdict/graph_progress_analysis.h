#pragma once
// Communication hang on an algorithm's own graph (NCCL's Tree, PAT: a rank has several peers
// on one channel), from the debugger's records of every connection of each channel
// (RingProgress::connections). Evidence: the debugger phase (simnccl's wait sites under gdb;
// on a GPU the waiting threads' spin loops under cuda-gdb). What a GPU job shows there is the
// same: which connection each blocked thread waits on, and each connection's counters.
//
// Every waiting end says what it waits for: a receiver for data on X->Y, a sender for a
// clear-to-send (a freed slot) on X->Y. Following each wait to what could satisfy it ends
// where the flow stopped:
//   - data X posted that Y never saw (the sender's steps ahead of the receiver's tail): the
//     link X->Y lost it;
//   - a sender waiting for a slot its receiver already freed, the receiver waiting for data:
//     the clear-to-send was lost on X->Y;
//   - a receiver waiting for data from a sender that finished the collective (it posted
//     everything): the link X->Y;
//   - a rank that is inside the collective and waits on nothing (no thread blocked on any of
//     its connections) though others wait on it: that rank's GPU stopped;
//   - a rank with no records: unknown, a suspect.
// Waits that only lead back to waits already followed (a tree's up and down phases waiting on
// each other) end nowhere. A channel names a culprit when all its waits end in one place; the
// culprit is what most channels name.
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

// Where the waits of one channel end (global ranks).
struct GraphStop {
  enum class Kind {
    kDataLost,        // link: the sender posted steps the receiver never saw
    kCreditLost,      // link: the sender waits for a slot its receiver freed
    kSenderFinished,  // link: the receiver waits for data of a sender that finished the collective
    kRankStopped,     // rank: inside the collective, waiting on nothing, others wait on it
    kRankUnread,      // rank: others wait on it, and the debugger read nothing of it
  };
  Kind kind = Kind::kRankUnread;
  std::optional<Link> link;
  std::optional<int> rank;
  uint64_t posted = 0;     // kDataLost: the sender's steps of this collective on the link
  uint64_t delivered = 0;  // kDataLost: what the receiver saw of them
  int waits = 0;           // waiting ends whose chain ends here

  bool sameAs(const GraphStop& o) const { return kind == o.kind && link == o.link && rank == o.rank; }
};

struct GraphChannel {
  int channel = 0;
  std::vector<GraphStop> stops;  // every place this channel's waits end
};

struct GraphFinding {
  std::string algorithm;  // what the records say NCCL ran: "TREE", "PAT"
  std::optional<Link> link;
  std::optional<int> rank;
  std::optional<GraphStop> stop;  // the named culprit's stop, as one channel saw it
  int channels_agree = 0;
  int channels_total = 0;
  std::vector<GraphChannel> channels;
  std::vector<int> unread;         // ranks the waits lead to that the debugger read nothing of
  std::vector<GraphStop> several;  // when nothing was named: every place the waits end
  std::string note;                // why nothing was named
};

class GraphProgressAnalysis {
 public:
  // `to_global` maps a communicator rank to a global rank; `finished(comm_rank)` says whether
  // that rank completed the collective (its snapshot's last completed sequence number).
  GraphProgressAnalysis(std::function<int(int)> to_global, std::function<bool(int)> finished)
      : to_global_(std::move(to_global)), finished_(std::move(finished)) {}

  // A record the caller keeps alive for the analysis's lifetime, or one the analysis keeps.
  void add(const RingProgress& record) { records_.push_back(&record); }
  void add(RingProgress&& record) { records_.push_back(&owned_.emplace_back(std::move(record))); }
  // Whether records of the collective carry the channels' graph (the reader saw every connection).
  static bool readsGraph(const RingProgress& r) { return !r.connections.empty() && r.algorithm != "RING"; }

  GraphFinding analyze(const std::string& comm, std::optional<uint64_t> seq) const;

 private:
  std::function<int(int)> to_global_;
  std::function<bool(int)> finished_;
  std::deque<RingProgress> owned_;  // a deque never moves its elements
  std::vector<const RingProgress*> records_;
};

}  // namespace hangwatch::verdict
