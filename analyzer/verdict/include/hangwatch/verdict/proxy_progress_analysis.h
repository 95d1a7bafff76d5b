#pragma once
// Where the ring stopped, from NCCL's own profiler events in the watchdog snapshots (no
// debugger): each network connection of the hung communicator, seen from its two ends,
// is classified by where its oldest unfinished step waits (analyzer/verdict/README.md):
//   on the wire     the sender handed it to the network and the network never completed it,
//                   the receiver still waits for it: the link itself;
//   receiver side   data reached the receiver and its GPU does not take it, or the sender
//                   waits for the receiver to post a buffer: the stop is at or after the receiver;
//   sender side     the sender's GPU has not filled the buffer it was given: the stop is at or
//                   before the sender.
// A rank whose GPU neither takes what arrived nor fills what it was given has stopped. Only
// network (NET) connections report: links inside a node (P2P, SHM, NVLink) have no proxy, so
// a fault there is narrowed to the ranks of that node, never guessed. When every network
// link of a channel waits at its sender, the ring orders them: a rank after the stop sends
// only what reached it, so the sender with the fewest steps done is the first after the stop.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

// kCreditLost: the receiver posted a buffer (RecvWait) that the sender still waits to be
// cleared for (SendPeerWait): the clear-to-send between them was lost, so the link is at fault.
enum class ProxyStall { kIdle, kOnTheWire, kReceiverSide, kSenderSide, kWaitingForData, kCreditLost };

const char* proxyStallText(ProxyStall s);

struct ProxyLinkState {
  Link link;  // global ranks
  int channel = 0;
  bool send_seen = false, recv_seen = false;
  ProxyStall stall = ProxyStall::kIdle;
  std::string detail;  // "rank 1 handed step 24 to the network; rank 2 still waits for it"
};

struct ProxyFinding {
  std::string nccl_comm;                 // NCCL's id of the communicator, hex; empty when unknown
  uint64_t nccl_comm_id = 0;             // the same, as a number
  std::vector<int> ranks_with_progress;  // ranks whose snapshot carries the plugin's progress
  std::vector<ProxyLinkState> links;     // every network connection seen, by channel
  std::optional<Link> link;              // a link on the wire
  std::optional<int> rank;               // a rank whose GPU stopped
  int channels_agree = 0;                // channels that show the culprit
  int channels_total = 0;                // channels with a network connection seen
  std::vector<Link> wire_links;          // every link seen on the wire (more than one: ambiguous)
  std::vector<int> narrowed;             // nothing named: the ranks the fault lies among
  std::vector<std::string> narrowed_hosts;
  // The network connections bound a stop in every node of the communicator (each node's
  // senders starved, or data held at its receivers): the ranks of each node, by host. One stop
  // per node and one that starves every node are not told apart without per-link progress
  // inside the nodes; each node is a suspect.
  std::vector<std::vector<int>> every_node;
  // Per channel where several links wait at their sender: the one with the fewest steps done,
  // whose sender is the first rank after the stop on a ring.
  std::vector<Link> first_after_stop;
  std::vector<std::string> ring_order_evidence;  // per such channel, the counts that told
  std::vector<int> kernel_not_started;   // ranks none of whose kernel channels is in flight
  std::vector<int> kernel_in_flight;     // ranks with a kernel channel started and not finished
  std::string note;                      // why nothing could be said, when nothing could
  std::string rank_evidence;             // `rank` named from other than its two network ends: why
  // Algorithms other than RING that NCCL launched collectives of this communicator with since
  // the stuck one was issued (Coll events): the stuck collective, or one queued behind it, may
  // have run them. A tree's or PAT's steps are not a ring's: the ring-shaped rules (a rank that
  // neither takes nor gives, the fewest steps sent) are then not used.
  std::vector<std::string> other_algorithms;
  // No network connection, and every member's snapshot names one host: the communicator runs
  // inside that node, so whatever stopped it (a GPU, an NVLink or PCIe link) is there.
  std::string members_host;
  std::vector<int> members_on_host;
  bool has_data() const { return !links.empty(); }
};

class ProxyProgressAnalysis {
 public:
  // `to_global` maps a rank of the communicator to a global rank.
  ProxyProgressAnalysis(const JobData& job, std::function<int(int)> to_global)
      : job_(job), to_global_(std::move(to_global)) {}

  // `comm`: the watchdog's hash of the hung communicator; `members`: its global ranks.
  ProxyFinding analyze(const std::string& comm, const std::vector<int>& members) const;

 private:
  const JobData& job_;
  std::function<int(int)> to_global_;
};

}  // namespace hangwatch::verdict
