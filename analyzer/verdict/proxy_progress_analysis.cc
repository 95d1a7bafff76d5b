#include "hangwatch/verdict/proxy_progress_analysis.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hangwatch::verdict {
namespace {

enum class EndState { kAbsent, kIdle, kWire, kCredit, kOwnGpu, kWaitingData, kFlush };

// Stages: send posted, filled, sent, done; recv posted, arrived, delivered, done.
EndState sendState(const ProxyEnd* e) {
  if (e == nullptr) return EndState::kAbsent;
  const auto& s = e->steps;
  if (s[2] > s[3]) return EndState::kWire;
  if (s[1] > s[2]) return EndState::kCredit;
  if (s[0] > s[1]) return EndState::kOwnGpu;
  return EndState::kIdle;
}

EndState recvState(const ProxyEnd* e) {
  if (e == nullptr) return EndState::kAbsent;
  const auto& s = e->steps;
  if (s[0] > s[1]) return EndState::kWaitingData;
  if (s[1] > s[2]) return EndState::kFlush;
  if (s[2] > s[3]) return EndState::kOwnGpu;
  return EndState::kIdle;
}

std::string ago(float s) { return s < 0 ? "never" : fmt::format("{:.1f} s ago", s); }

struct Ends {
  const ProxyEnd* send = nullptr;
  const ProxyEnd* recv = nullptr;
};

// On InfiniBand the receiver's irecv sends the clear-to-send for the buffer it posts, and the
// sender's isend gives no request until it arrives (NCCL 2.28 src/transport/net_ib: the
// receiver's FIFO post; src/transport/net.cc records SendPeerWait while isend returns none).
// A step the receiver posted (RecvWait) that the sender has ready and still waits to send
// means that message was lost between them. The counts compare only over the same operations.
bool creditLost(const Ends& e) {
  if (e.send == nullptr || e.recv == nullptr) return false;
  const ProxyEnd& s = *e.send;
  const ProxyEnd& r = *e.recv;
  if (s.ops != r.ops || s.ops_done != r.ops_done || s.untracked_ops != 0 || r.untracked_ops != 0) return false;
  return s.steps[1] > s.steps[2] && r.steps[0] > s.steps[2] && r.steps[1] == s.steps[2];
}

ProxyLinkState classify(const Link& link, int channel, const Ends& e) {
  ProxyLinkState st;
  st.link = link;
  st.channel = channel;
  st.send_seen = e.send != nullptr;
  st.recv_seen = e.recv != nullptr;
  const EndState s = sendState(e.send), r = recvState(e.recv);
  const std::string from = fmt::format("rank {}", link.from), to = fmt::format("rank {}", link.to);
  if (s == EndState::kWire && (r == EndState::kAbsent || r == EndState::kWaitingData || r == EndState::kIdle)) {
    st.stall = ProxyStall::kOnTheWire;
    const float last = e.send->moved_s_ago[3];
    st.detail = fmt::format(
        "{} handed {} step(s) to the network that never completed ({}){}", from, e.send->steps[2] - e.send->steps[3],
        last < 0 ? std::string("no step ever completed") : "the last completion " + ago(last),
        r == EndState::kWaitingData ? "; " + to + " still waits for data (the last arrival " + ago(e.recv->moved_s_ago[1]) + ")"
                                    : "");
  } else if (s == EndState::kCredit && r == EndState::kWaitingData && creditLost(e)) {
    st.stall = ProxyStall::kCreditLost;
    st.detail = fmt::format(
        "{} posted a buffer for step {} and waits for its data; {} has it ready and still waits for {}'s "
        "clear-to-send: that message was lost between them (the last step sent {})",
        to, e.send->steps[2], from, to, ago(e.send->moved_s_ago[2]));
  } else if (s == EndState::kCredit || r == EndState::kOwnGpu || r == EndState::kFlush) {
    st.stall = ProxyStall::kReceiverSide;
    st.detail = r == EndState::kOwnGpu || r == EndState::kFlush
                    ? fmt::format("{}'s GPU does not take {} step(s) that arrived", to, e.recv->steps[1] - e.recv->steps[3])
                    : from + " has data ready that " + to + " posted no buffer for";
  } else if (s == EndState::kOwnGpu) {
    st.stall = ProxyStall::kSenderSide;
    st.detail = fmt::format("{}'s GPU has not filled the {} buffer(s) it was given{}", from,
                            e.send->steps[0] - e.send->steps[1], r == EndState::kWaitingData ? "; " + to + " waits for data" : "");
  } else if (r == EndState::kWaitingData) {
    st.stall = ProxyStall::kWaitingForData;
    st.detail = to + " waits for data; " + from + (s == EndState::kAbsent ? " did not report this connection" : " shows nothing pending");
  }
  return st;
}

using EndsByLink = std::map<std::tuple<int, int, int>, Ends>;  // (channel, from, to), global ranks

// Which NCCL id the communicator has (the one most ranks tie to its hash); false when none.
bool findNcclId(const JobData& job, const std::string& comm, ProxyFinding& f) {
  std::map<std::string, int> ids;
  for (const RankSummary& s : job.ranks) {
    if (s.has_progress) f.ranks_with_progress.push_back(s.rank);
    for (const SnapshotComm& c : s.comms)
      if (c.hash == comm && !c.nccl_id.empty()) ++ids[c.nccl_id];
  }
  if (f.ranks_with_progress.empty()) {
    f.note = "no rank's snapshot has NCCL profiler progress (the plugin did not run: HANGWATCH_LINK_PROFILER=0, "
             "NCCL_PROFILER_PLUGIN=none, or an NCCL without the v5 profiler API)";
    return false;
  }
  if (ids.empty()) {
    f.note = "no rank could tie this communicator to NCCL's own id, so its profiler progress cannot be told apart";
    return false;
  }
  f.nccl_comm = std::max_element(ids.begin(), ids.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  f.nccl_comm_id = ncclIdValue(f.nccl_comm);
  return true;
}

EndsByLink collectEnds(const JobData& job, uint64_t id, const std::function<int(int)>& to_global) {
  EndsByLink ends;
  for (const RankSummary& s : job.ranks) {
    for (const ProxyEnd& e : s.proxy_ends) {
      if (e.nccl_comm != id || e.peer < 0) continue;
      // Its own rank through the communicator too: a process may hold several of its ranks.
      const int me = e.comm_rank >= 0 ? to_global(e.comm_rank) : s.rank;
      const int other = to_global(e.peer);
      if (e.send) ends[{e.channel, me, other}].send = &e;
      else ends[{e.channel, other, me}].recv = &e;
    }
  }
  return ends;
}

void classifyLinks(const EndsByLink& ends, ProxyFinding& f) {
  std::set<int> channels;
  for (const auto& [key, e] : ends) {
    const auto& [channel, from, to] = key;
    ProxyLinkState st = classify({from, to}, channel, e);
    if (st.stall == ProxyStall::kIdle && !(e.send && e.recv)) continue;  // one idle end says nothing
    channels.insert(channel);
    f.links.push_back(std::move(st));
  }
  f.channels_total = static_cast<int>(channels.size());
}

void kernelChannels(const JobData& job, const std::vector<int>& members, ProxyFinding& f) {
  std::set<int> member_set(members.begin(), members.end());
  for (const RankSummary& s : job.ranks) {
    if (!member_set.count(s.rank) || !s.has_progress) continue;
    bool any = false, in_flight = false;
    for (const KernelChannelState& k : s.kernel_channels) {
      if (k.nccl_comm != f.nccl_comm_id) continue;
      any = true;
      in_flight = in_flight || k.started > k.stopped;
    }
    if (in_flight) f.kernel_in_flight.push_back(s.rank);
    else if (any) f.kernel_not_started.push_back(s.rank);
  }
  if (f.kernel_in_flight.empty()) f.kernel_not_started.clear();  // nothing runs anywhere: no contrast
}

// What NCCL launched the communicator's collectives with, on each member still waiting,
// from when its oldest pending collective there was issued on (and 50 ms before, for the
// two clocks' order: the watchdog stamps the call before NCCL's Coll event). A collective
// replayed in a CUDA graph may have had its Coll event only when it was captured: then any
// algorithm ever seen on the communicator counts.
void otherAlgorithms(const JobData& job, const std::string& comm, const std::vector<int>& members, ProxyFinding& f) {
  constexpr double kSlackS = 0.05;
  constexpr double kEver = 1e300;
  std::set<std::string> seen;
  for (int m : members) {
    const RankSummary* s = job.find(m);
    if (s == nullptr) continue;
    std::optional<double> since_s_ago;
    for (const SnapshotPendingOp& op : s->pending) {
      if (op.comm != comm) continue;
      if (op.op_class == "collective") since_s_ago = std::max(since_s_ago.value_or(0), op.issued_s_ago);
      if (op.op_class == "graph") since_s_ago = kEver;
    }
    if (!since_s_ago) continue;
    for (const CollAlgorithmUse& a : s->algorithms) {
      if (a.nccl_comm != f.nccl_comm_id || a.algo == "RING" || a.launched == 0) continue;
      if (a.last_s_ago < 0 || a.last_s_ago <= *since_s_ago + kSlackS) seen.insert(a.algo);
    }
  }
  f.other_algorithms.assign(seen.begin(), seen.end());
}

// A link on the wire names itself. True when that settles it (named, or ambiguous).
bool nameWireLink(ProxyFinding& f) {
  std::map<std::pair<int, int>, std::set<int>> wire;
  for (const ProxyLinkState& l : f.links)
    if (l.stall == ProxyStall::kOnTheWire || l.stall == ProxyStall::kCreditLost)
      wire[{l.link.from, l.link.to}].insert(l.channel);
  for (const auto& [k, chs] : wire) f.wire_links.push_back({k.first, k.second});
  if (wire.size() == 1) {
    f.link = f.wire_links.front();
    f.channels_agree = static_cast<int>(wire.begin()->second.size());
    return true;
  }
  if (wire.size() > 1) {
    f.note = "more than one link holds steps on the wire";
    return true;
  }
  return false;
}

// A rank whose GPU neither takes what arrived (its own recv end) nor fills what it was
// given (its own send end) on one channel has stopped: it is blocked on neither side.
std::map<int, std::set<int>> stoppedRanks(const EndsByLink& ends, const ProxyFinding& f) {
  std::map<int, std::set<int>> stopped;  // rank -> channels
  for (const ProxyLinkState& in : f.links) {
    if (in.stall != ProxyStall::kReceiverSide || !in.recv_seen) continue;
    const int r = in.link.to;
    auto e = ends.find({in.channel, in.link.from, r});
    if (e == ends.end() || recvState(e->second.recv) != EndState::kOwnGpu) continue;
    for (const ProxyLinkState& out : f.links) {
      if (out.channel != in.channel || out.link.from != r || out.stall != ProxyStall::kSenderSide || !out.send_seen)
        continue;
      stopped[r].insert(in.channel);
    }
  }
  return stopped;
}

// Several links on one channel wait at their sender: on a ring a rank after the stop can
// send only what reached it, one more chunk per hop, so the sender with the fewest steps
// done is the first after the stop. Their steps count from when the watchdog began, so
// they compare only over the same operations. Adds the ranks the stop lies next to.
void orderStarvedSenders(int channel, const std::vector<const ProxyLinkState*>& links, const EndsByLink& ends,
                         std::set<int>& bounds, ProxyFinding& f) {
  auto sendEnd = [&](const ProxyLinkState* l) { return ends.at({channel, l->link.from, l->link.to}).send; };
  const ProxyEnd* first = sendEnd(links.front());
  bool comparable = links.size() > 1;
  for (const ProxyLinkState* l : links) {
    const ProxyEnd* e = sendEnd(l);
    comparable = comparable && e && e->untracked_ops == 0 && e->ops == first->ops && e->ops_done == first->ops_done;
  }
  const ProxyLinkState* least = nullptr;
  bool unique = comparable;
  for (const ProxyLinkState* l : links) {
    if (!comparable) break;
    const uint64_t done = sendEnd(l)->steps[3];
    if (!least || done < sendEnd(least)->steps[3]) {
      least = l;
      unique = true;
    } else if (done == sendEnd(least)->steps[3]) {
      unique = false;
    }
  }
  if (least && !unique) {
    // One stop leaves one sender with the fewest steps; several with equally few are each the
    // first after a stop of their own: the ring stopped in more than one place.
    std::vector<std::string> tied;
    for (const ProxyLinkState* l : links)
      if (sendEnd(l)->steps[3] == sendEnd(least)->steps[3]) {
        bounds.insert(l->link.from);
        tied.push_back(fmt::format("{} -> {}", l->link.from, l->link.to));
      }
    f.ring_order_evidence.push_back(fmt::format(
        "channel {}: {} sent equally few steps ({}), so the ring stopped before each of them: in more than one place",
        channel, fmt::join(tied, ", "), sendEnd(least)->steps[3]));
    return;
  }
  if (!least) {
    for (const ProxyLinkState* l : links) bounds.insert(l->link.from);
    return;
  }
  bounds.insert(least->link.from);
  f.first_after_stop.push_back(least->link);
  std::vector<std::string> others;
  for (const ProxyLinkState* l : links)
    if (l != least) others.push_back(fmt::format("{} -> {} {}", l->link.from, l->link.to, sendEnd(l)->steps[3]));
  f.ring_order_evidence.push_back(fmt::format(
      "channel {}: {} -> {} sent the fewest steps ({}; {}), so rank {} is the first network sender after the stop",
      channel, least->link.from, least->link.to, sendEnd(least)->steps[3], fmt::join(others, ", "), least->link.from));
}

// Narrow by node: on a ring the stop is at or after the receiver of a receiver-side link and
// at or before the sender of a sender-side link; what lies between is inside the nodes named.
// On a tree (or any other algorithm) a sender-side link says nothing of where: every rank
// waiting for its parent's broadcast, or for a child's reduce, shows one. Data that arrived
// and that the receiving GPU does not take does: that GPU stopped, or it waits for another
// input first; with one fault that is a child inside its node (the chain), or a network child
// whose data would then not have arrived either: the receivers' nodes hold the stop.
void narrowByNode(const JobData& job, const EndsByLink& ends, const std::vector<int>& members, ProxyFinding& f) {
  std::map<int, std::vector<const ProxyLinkState*>> starved;  // channel -> sender-side links
  std::set<int> bounds;                                       // ranks the stop lies next to
  for (const ProxyLinkState& l : f.links) {
    if (l.stall == ProxyStall::kReceiverSide) bounds.insert(l.link.to);
    if (l.stall == ProxyStall::kSenderSide) starved[l.channel].push_back(&l);
  }
  if (!f.other_algorithms.empty() && !bounds.empty()) starved.clear();
  for (const auto& [channel, links] : starved) {
    if (f.other_algorithms.empty()) {
      orderStarvedSenders(channel, links, ends, bounds, f);
    } else {
      for (const ProxyLinkState* l : links) bounds.insert(l->link.from);  // no ring order to go by
    }
  }
  std::set<std::string> hosts;
  for (int r : bounds) {
    const RankSummary* s = job.find(r);
    hosts.insert(s && !s->host.empty() ? s->host : fmt::format("rank {}'s host", r));
  }
  for (int m : members) {
    const RankSummary* s = job.find(m);
    if (s && hosts.count(s->host)) f.narrowed.push_back(m);
  }
  f.narrowed_hosts.assign(hosts.begin(), hosts.end());
}

}  // namespace

const char* proxyStallText(ProxyStall s) {
  switch (s) {
    case ProxyStall::kIdle: return "idle";
    case ProxyStall::kOnTheWire: return "on the wire";
    case ProxyStall::kReceiverSide: return "stopped at the receiver";
    case ProxyStall::kSenderSide: return "stopped at the sender";
    case ProxyStall::kWaitingForData: return "waiting for data";
    case ProxyStall::kCreditLost: return "clear-to-send lost";
  }
  return "idle";
}

ProxyFinding ProxyProgressAnalysis::analyze(const std::string& comm, const std::vector<int>& members) const {
  ProxyFinding f;
  if (!findNcclId(job_, comm, f)) return f;
  const EndsByLink ends = collectEnds(job_, f.nccl_comm_id, to_global_);
  classifyLinks(ends, f);
  kernelChannels(job_, members, f);
  if (f.links.empty()) {
    f.note = "NCCL's profiler saw no network connection of this communicator: its links are inside nodes "
             "(P2P, SHM, NVLink), which have no proxy and report no steps";
    std::set<std::string> hosts;
    for (int m : members) {
      const RankSummary* s = job_.find(m);
      hosts.insert(s != nullptr && s->has_snapshot ? s->host : std::string());
    }
    if (hosts.size() == 1 && !hosts.begin()->empty()) {
      f.members_host = *hosts.begin();
      f.members_on_host = members;
    }
    return f;
  }
  otherAlgorithms(job_, comm, members, f);
  if (nameWireLink(f)) return f;
  // On a tree a healthy rank waiting on one child holds the other child's data and has
  // nothing for its parent: it looks stopped like a dead one. Only a ring's rank is stopped so.
  const std::map<int, std::set<int>> stopped =
      f.other_algorithms.empty() ? stoppedRanks(ends, f) : std::map<int, std::set<int>>{};
  if (stopped.size() == 1) {
    f.rank = stopped.begin()->first;
    f.channels_agree = static_cast<int>(stopped.begin()->second.size());
    return f;
  }
  narrowByNode(job_, ends, members, f);
  if (f.narrowed.size() >= members.size()) {
    // Every node is still possible: that narrows nothing, but each node may hold a stop.
    std::map<std::string, std::vector<int>> by_host;
    for (int r : f.narrowed) {
      const RankSummary* s = job_.find(r);
      by_host[s && !s->host.empty() ? s->host : fmt::format("rank {}'s host", r)].push_back(r);
    }
    if (by_host.size() > 1)
      for (auto& [host, ranks] : by_host) f.every_node.push_back(std::move(ranks));
    f.narrowed.clear();
    f.narrowed_hosts.clear();
    f.note = "its network connections do not put the stop in fewer than all of the communicator's nodes";
    return f;
  }
  f.note = stopped.size() > 1              ? "more than one rank looks stopped"
           : !f.other_algorithms.empty() ? fmt::format("NCCL ran {} on it, whose steps do not say which rank stopped",
                                                        fmt::join(f.other_algorithms, " and "))
                                         : "no network connection is stuck on the wire";
  return f;
}

}  // namespace hangwatch::verdict
