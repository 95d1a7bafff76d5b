#include "hangwatch/verdict/report_builder.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/verdict/flight_recorder_evidence.h"
#include "hangwatch/verdict/verdict_maker.h"

namespace hangwatch::verdict {
namespace {

// Ring order of the focus communicator from channel 0's prev/next, else comm rank order.
std::vector<int> ringOrder(const Report& r, const SequenceAnalysis& seq) {
  std::vector<int> order;
  if (!r.focus) return order;
  const std::string& comm = r.focus->comm;
  std::map<int, int> next;
  int size = 0;
  for (const RankSummary& s : r.job.ranks) {
    for (const SnapshotComm& c : s.comms) {
      if (c.hash == comm) size = std::max(size, c.size);
    }
    for (const RingProgress& p : s.ring_progress) {
      if (p.comm == comm && p.channel == 0 && p.next >= 0) next[p.rank] = p.next;
    }
  }
  if (size <= 0) return order;
  std::set<int> seen;
  if (static_cast<int>(next.size()) == size) {
    for (int cr = 0; static_cast<int>(order.size()) < size && !seen.count(cr);) {
      seen.insert(cr);
      order.push_back(seq.globalRank(comm, cr));
      auto it = next.find(cr);
      if (it == next.end()) break;
      cr = it->second;
    }
    if (static_cast<int>(order.size()) == size) return order;
    order.clear();
  }
  for (int cr = 0; cr < size; ++cr) order.push_back(seq.globalRank(comm, cr));
  return order;
}

std::vector<NodeRanks> nodesOf(const JobData& job) {
  std::vector<NodeRanks> nodes;
  std::map<std::string, size_t> index;
  for (const RankSummary& s : job.ranks) {  // ascending: nodes come in the order of their first rank
    if (s.host.empty()) continue;
    auto [it, fresh] = index.try_emplace(s.host, nodes.size());
    if (fresh) nodes.push_back({s.host, {}});
    nodes[it->second].ranks.insert(s.rank);
  }
  return nodes;
}

void nameSuspectHosts(Verdict& v, const JobData& job) {
  for (Suspect& s : v.suspects) {
    std::vector<int> ranks = s.ranks;
    if (s.link) ranks = s.link->to >= 0 ? std::vector<int>{s.link->from, s.link->to} : std::vector<int>{s.link->from};
    for (int r : ranks) {
      std::string h = hostOf(job, r);
      if (!h.empty() && std::find(s.hosts.begin(), s.hosts.end(), h) == s.hosts.end()) s.hosts.push_back(h);
    }
  }
}

// The NIC on `end`'s side of the culprit link: a NET connection of one of its records on the
// verdict's communicator, in the link's direction, whose reader saw its net device.
std::optional<LinkNic> linkNic(const JobData& job, const Verdict& v, const SequenceAnalysis& seq, bool sends) {
  const Link& link = *v.culprit_link;
  const int self = sends ? link.from : link.to, peer = sends ? link.to : link.from;
  auto global = [&](int comm_rank) { return v.link_in_comm_ranks ? comm_rank : seq.globalRank(v.communicator, comm_rank); };
  const char* direction = sends ? "send" : "recv";
  for (const RankSummary& s : job.ranks) {
    for (const RingProgress& p : s.ring_progress) {
      if (p.comm != v.communicator || p.rank < 0 || global(p.rank) != self) continue;
      std::vector<const RingConnection*> ends;
      for (const RingConnection& c : p.connections)
        if (c.direction == direction) ends.push_back(&c);
      if (const auto& side = sends ? p.send : p.recv) ends.push_back(&*side);
      for (const RingConnection* c : ends) {
        if (!c->nic || c->peer < 0 || global(c->peer) != peer) continue;
        return LinkNic{self, sends, s.host, c->nic->index, c->nic->device, c->nic->port};
      }
    }
  }
  return std::nullopt;
}

std::string nicText(const LinkNic& n) {
  std::string device = n.device.empty() ? fmt::format("net device {}", n.index) : n.device;
  return fmt::format("{}{}{}", n.host.empty() ? "" : n.host + "'s ", device, n.port ? fmt::format(" port {}", *n.port) : "");
}

// The next step for NIC ports: `what` names them ("node-0's mlx5_3 port 1 and ...").
std::string portCheck(const std::string& what) {
  return fmt::format("Check {}: the port's state and error counters (ibstat; /sys/class/infiniband/<device>/ports/"
                     "<port>/counters: link_downed, symbol_error, port_rcv_errors) and the switch port behind it.",
                     what);
}

// `rank`'s rank in communicator `comm` (its snapshot's entry); -1 when not known.
int commRankOf(const RankSummary* s, const std::string& comm, const SnapshotComm** entry) {
  if (s == nullptr) return -1;
  for (const SnapshotComm& c : s->comms)
    if (c.hash == comm) {
      *entry = &c;
      return c.rank;
    }
  return -1;
}

// The NIC at `end`'s side from NCCL's INFO lines at connection set-up (the watchdog keeps
// them): its NET connections with the other end in the link's direction, on the channels its
// profiler saw the communicator use to that peer. A line names ranks, not the communicator:
// another communicator with the same two ranks could use another NIC, so the NIC is named only
// when every such line says the same one; `devices` gets what they said.
std::optional<LinkNic> linkNicFromNcclInfo(const JobData& job, const Verdict& v, const SequenceAnalysis& seq,
                                           bool sends, std::set<int>* devices) {
  const Link& link = *v.culprit_link;
  const int self = sends ? link.from : link.to, peer = sends ? link.to : link.from;
  const RankSummary* s = nullptr;
  const SnapshotComm* comm = nullptr;
  int self_cr = self, peer_cr = peer;
  if (v.link_in_comm_ranks) {
    comm = seq.commEntry(v.communicator, self, &s);
  } else {
    const SnapshotComm* peer_comm = nullptr;
    s = job.find(self);
    self_cr = commRankOf(s, v.communicator, &comm);
    peer_cr = commRankOf(job.find(peer), v.communicator, &peer_comm);
  }
  if (s == nullptr || !s->nccl_net || comm == nullptr || self_cr < 0 || peer_cr < 0) return std::nullopt;
  std::set<int> channels;
  for (const ProxyEnd& e : s->proxy_ends)
    if (e.nccl_comm == ncclIdValue(comm->nccl_id) && e.comm_rank == self_cr && e.peer == peer_cr && e.send == sends)
      channels.insert(e.channel);
  for (const NcclNetLine& l : s->nccl_net->connections) {
    const bool ends = sends ? l.from == self_cr && l.to == peer_cr : l.to == self_cr && l.from == peer_cr;
    if (l.send == sends && ends && (channels.empty() || channels.count(l.channel))) devices->insert(l.net_dev);
  }
  if (devices->size() != 1) return std::nullopt;
  const int index = *devices->begin();
  const NcclNetDeviceName* d = s->nccl_net->device(index);
  return LinkNic{self, sends, s->host, index, d ? d->name : "", d ? d->port : std::nullopt, "nccl-info"};
}

std::string nicEvidence(const std::vector<LinkNic>& nics, const std::string& source) {
  std::vector<std::string> ends;
  for (const LinkNic& n : nics)
    if (n.source == source)
      ends.push_back(fmt::format("rank {} {} through {}", n.rank, n.sends ? "sends" : "receives", nicText(n)));
  if (ends.empty()) return "";
  if (source == "debugger")
    return fmt::format("The link crosses nodes: {} (NCCL's net device of each end's connection, read by the debugger "
                       "phase).",
                       fmt::join(ends, "; "));
  return fmt::format("The link crosses nodes: {} (NCCL's own INFO line at each connection's set-up, \"Channel ... "
                     "via NET/<net>/<device>\", kept by the watchdog; every such line between the two ranks named "
                     "that NIC).",
                     fmt::join(ends, "; "));
}

// Where the culprit link crosses nodes, the NIC of each end, named in the evidence with what
// to check on it: the debugger's reading of NCCL's host state, else NCCL's INFO lines.
void nameLinkNics(Verdict& v, const JobData& job, const SequenceAnalysis& seq) {
  if (!v.culprit_link || v.culprit_link->to < 0 || v.communicator.empty()) return;
  std::vector<std::string> unnamed;
  for (bool sends : {true, false}) {
    std::set<int> devices;
    if (auto nic = linkNic(job, v, seq, sends)) {
      v.culprit_link_nics.push_back(*nic);
    } else if (auto logged = linkNicFromNcclInfo(job, v, seq, sends, &devices)) {
      v.culprit_link_nics.push_back(*logged);
    } else if (devices.size() > 1) {
      unnamed.push_back(fmt::format("rank {}'s {} net devices {}", sends ? v.culprit_link->from : v.culprit_link->to,
                                    sends ? "sending" : "receiving", fmt::join(devices, " and ")));
    }
  }
  if (!unnamed.empty())
    v.evidence.push_back(fmt::format("NCCL's INFO lines name more than one NIC for the link's connections ({}): they "
                                     "name ranks, not the communicator, so the NIC is not named from them.",
                                     fmt::join(unnamed, "; ")));
  if (v.culprit_link_nics.empty()) return;
  std::vector<std::string> named;
  for (const LinkNic& n : v.culprit_link_nics)
    if (!n.device.empty()) named.push_back(nicText(n));
  for (const char* source : {"debugger", "nccl-info"})
    if (std::string e = nicEvidence(v.culprit_link_nics, source); !e.empty()) v.evidence.push_back(std::move(e));
  if (named.empty()) return;
  // After testing the link, before draining its hosts.
  v.next_steps.insert(v.next_steps.begin() + std::min<size_t>(1, v.next_steps.size()),
                      portCheck(fmt::format("{}", fmt::join(named, " and "))));
}

// A rank named because both of its connections stopped, whose GPU posted steps of the
// collective that never arrived, and whose connections both cross nodes through one NIC of
// its own: from the ring a NIC that stops looks like that too, so the verdict names the NIC
// beside the rank (the debugger's reading of each connection's net device).
void nameRankNic(Verdict& v, const JobData& job, const SequenceAnalysis& seq) {
  if (v.culprit_link || v.culprit_ranks.size() != 1 || v.communicator.empty() || v.link_in_comm_ranks) return;
  const int rank = v.culprit_ranks.front();
  const RankSummary* s = job.find(rank);
  if (s == nullptr) return;
  std::optional<LinkNic> send, recv;
  for (const RingProgress& p : s->ring_progress) {
    if (p.comm != v.communicator || p.rank < 0 || seq.globalRank(v.communicator, p.rank) != rank) continue;
    std::vector<const RingConnection*> ends;
    for (const RingConnection& c : p.connections) ends.push_back(&c);
    if (p.send) ends.push_back(&*p.send);
    if (p.recv) ends.push_back(&*p.recv);
    for (const RingConnection* c : ends) {
      if (!c->nic || c->nic->device.empty()) continue;
      const bool sends = c->direction.empty() ? c == (p.send ? &*p.send : nullptr) : c->direction == "send";
      // Its GPU ran the collective: it posted steps on the connection that never got through.
      if (sends && !(c->posted_step && c->base_step && *c->posted_step > *c->base_step)) continue;
      (sends ? send : recv) = LinkNic{rank, sends, s->host, c->nic->index, c->nic->device, c->nic->port};
    }
  }
  if (!send || !recv || send->device != recv->device) return;
  v.culprit_link_nics = {*send, *recv};
  const std::string nic = nicText(*send);
  v.headline += fmt::format(" Its connections to both neighbours cross nodes through {}: that NIC is as likely.", nic);
  v.evidence.push_back(fmt::format("Rank {} posted steps of the collective that never arrived, and both of its "
                                   "connections cross nodes through {} (NCCL's net device of each, read by the debugger "
                                   "phase): from the ring a NIC that stops looks the same as the rank.",
                                   rank, nic));
  v.next_steps.insert(v.next_steps.begin(), portCheck(nic + " first"));
}

}  // namespace

std::string hostOf(const JobData& job, int rank) {
  const RankSummary* s = job.find(rank);
  return s ? s->host : "";
}

std::string hostsText(const Suspect& s) {
  std::string out;
  for (const std::string& h : s.hosts) out += (out.empty() ? "" : s.link ? " -> " : ", ") + h;
  return out;
}

Report ReportBuilder::build(JobData job) {
  Report r;
  r.job = std::move(job);
  stackmerge::StackClassifier classifier;
  for (const RankSummary& s : r.job.ranks) {
    if (s.has_forensics && !s.threads.empty()) classifier.addRank(s.rank, s.threads, *r.job.stacks);
  }
  r.stack_classes = classifier.classes();
  r.rank_class.assign(r.job.world_size, -1);
  for (size_t i = 0; i < r.stack_classes.size(); ++i) {
    for (const auto& [first, last] : r.stack_classes[i].ranks.intervals()) {
      for (int k = first; k <= last; ++k) {
        if (k >= 0 && k < r.job.world_size) r.rank_class[k] = static_cast<int>(i);
      }
    }
  }
  VerdictMaker maker(r.job, r.stack_classes);
  r.verdict = maker.decide();
  r.focus = maker.sequences().focus();
  r.ring_order = ringOrder(r, maker.sequences());
  r.nodes = nodesOf(r.job);
  nameSuspectHosts(r.verdict, r.job);
  nameLinkNics(r.verdict, r.job, maker.sequences());
  nameRankNic(r.verdict, r.job, maker.sequences());
  addFlightRecorderEvidence(r.verdict, r.job);
  return r;
}

}  // namespace hangwatch::verdict
