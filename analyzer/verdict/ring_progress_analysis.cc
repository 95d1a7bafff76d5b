#include "hangwatch/verdict/ring_progress_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "hangwatch/common/forensics_dump.h"

namespace hangwatch::verdict {
namespace {

struct Connection {
  std::optional<uint64_t> delivered;  // the receiver's view of the sender's tail
  std::optional<uint64_t> consumed;   // the sender's view of the receiver's head
  std::optional<RingConnection> recv_end;  // the receiver's record as read
  std::optional<RingConnection> send_end;  // the sender's record as read: the receiver's head, its own posts
  uint64_t progress() const {
    uint64_t p = std::numeric_limits<uint64_t>::max();
    if (delivered) p = std::min(p, *delivered);
    if (consumed) p = std::min(p, *consumed);
    return p;
  }
};

ChannelFinding analyzeChannel(int channel, const std::map<std::pair<int, int>, Connection>& conns) {
  ChannelFinding f;
  f.channel = channel;
  f.connections = static_cast<int>(conns.size());
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (const auto& [key, c] : conns) least = std::min(least, c.progress());
  f.least_progress = least;
  f.next_least = least;
  bool others = false;
  for (const auto& [key, c] : conns) {
    if (c.progress() == least) {
      f.minimal.push_back({key.first, key.second});
    } else if (!others || c.progress() < f.next_least) {
      f.next_least = c.progress();
      others = true;
    }
  }
  // Everything equally stuck says nothing about where it started.
  if (!others) return f;
  if (f.minimal.size() == 1) {
    f.link = f.minimal.front();
    return f;
  }
  // A rank is named when the minimal connections are exactly its way in and its way out.
  std::map<int, int> touches;
  for (const Link& l : f.minimal) {
    ++touches[l.from];
    if (l.to != l.from) ++touches[l.to];
  }
  for (const auto& [rank, n] : touches) {
    if (n == static_cast<int>(f.minimal.size())) {
      bool in = false, out = false;
      for (const Link& l : f.minimal) {
        in = in || l.to == rank;
        out = out || l.from == rank;
      }
      if (in && out) f.rank = rank;
    }
  }
  return f;
}

bool creditLost(const Connection& c) { return c.send_end && c.recv_end && clearToSendLost(*c.send_end, *c.recv_end); }

// The ring's connections that no record reports, from the prev/next each record names.
// Ranks without a record on this channel are dark: the way out of a dark rank is known only
// when the next rank reported (its prev), and seen only when one end reported a counter.
std::vector<Link> unseenConnections(const std::map<int, std::pair<int, int>>& prev_next, int comm_size,
                                    const std::map<std::pair<int, int>, Connection>& conns_by_comm_rank) {
  std::map<int, int> next_of;
  for (const auto& [rank, pn] : prev_next) {
    next_of[rank] = pn.second;
    if (pn.first >= 0 && !prev_next.count(pn.first)) next_of[pn.first] = rank;
  }
  // One way out and one way in unknown (two dark ranks in a row): they must be one connection.
  std::vector<int> no_next, no_prev;
  std::set<int> has_prev;
  for (const auto& [from, to] : next_of) has_prev.insert(to);
  for (int m = 0; m < comm_size; ++m) {
    if (!next_of.count(m)) no_next.push_back(m);
    if (!has_prev.count(m)) no_prev.push_back(m);
  }
  if (no_next.size() == 1 && no_prev.size() == 1 && no_next[0] != no_prev[0]) next_of[no_next[0]] = no_prev[0];
  std::vector<Link> out;
  for (int m = 0; m < comm_size; ++m) {
    auto n = next_of.find(m);
    if (n == next_of.end()) {
      out.push_back({m, -1});
    } else if (!conns_by_comm_rank.count({m, n->second})) {
      out.push_back({m, n->second});
    }
  }
  return out;
}

}  // namespace

// The receiver has taken every step the sender posted and waits for the next; the sender
// waits for a clear-to-send for a slot the receiver already freed. Neither GPU stopped:
// the credit was lost between them (absolute counters on both sides, no base needed).
bool clearToSendLost(const RingConnection& s, const RingConnection& r) {
  if (!s.waiting || !r.waiting || !s.posted_step) return false;
  if (!s.observed_known || !s.target_known || !r.observed_known || !r.target_known) return false;
  const uint64_t consumed = r.target_step - 1;  // the receiver's steps taken, as it waits for the next
  return r.observed_step == *s.posted_step && r.target_step == r.observed_step + 1 && s.observed_step < consumed &&
         s.target_step <= consumed;
}

namespace {

// Each channel's connections as the records of one collective report them (global ranks), and,
// in communicator ranks, each reporting rank's (prev, next) and which connections have a view.
struct RingViews {
  std::map<int, std::map<std::pair<int, int>, Connection>> channels;
  std::map<int, std::map<int, std::pair<int, int>>> ring_of;
  std::map<int, std::map<std::pair<int, int>, Connection>> seen_of;
  int comm_size = 0;
};

void addViews(const RingProgress& r, const std::function<int(int)>& to_global, RingViews& v) {
  v.comm_size = std::max({v.comm_size, r.comm_size.value_or(0), r.rank + 1, r.prev + 1, r.next + 1});
  v.ring_of[r.channel][r.rank] = {r.prev, r.next};
  // A view whose counter the reader could not read (device memory under plain gdb) is no view.
  const bool recv_view = r.recv && r.recv->peer >= 0 && r.recv->observed_known;
  const bool send_view = r.send && r.send->peer >= 0 && r.send->observed_known;
  if (recv_view) v.seen_of[r.channel][{r.recv->peer, r.rank}];
  if (send_view) v.seen_of[r.channel][{r.rank, r.send->peer}];
  const int self = to_global(r.rank);
  auto& conns = v.channels[r.channel];
  if (recv_view) {
    Connection& c = conns[{to_global(r.recv->peer), self}];
    uint64_t p = ringProgress(*r.recv);
    c.delivered = c.delivered ? std::min(*c.delivered, p) : p;
    c.recv_end = *r.recv;
  }
  if (send_view) {
    Connection& c = conns[{self, to_global(r.send->peer)}];
    uint64_t p = ringProgress(*r.send);
    c.consumed = c.consumed ? std::min(*c.consumed, p) : p;
    c.send_end = *r.send;
  }
}

// What most channels name, or why nothing was.
void vote(const std::map<std::pair<int, int>, int>& link_votes, RingFinding& out) {
  std::pair<int, int> winner{-1, -1};
  int best = 0;
  for (const auto& [key, n] : link_votes) {
    if (n > best) {
      best = n;
      winner = key;
    }
  }
  if (best == 0) {
    std::vector<std::string> several;
    for (const Link& l : out.least_seen) several.push_back(fmt::format("{} -> {}", l.from, l.to));
    out.note = several.empty()
                   ? "every channel's connections stopped at the same step"
                   : fmt::format("the connections with the least progress, {}, share no rank: the ring stopped in "
                                 "more than one place",
                                 fmt::join(several, ", "));
    return;
  }
  out.channels_agree = best;
  if (winner.second == -1) out.rank = winner.first;
  else out.link = Link{winner.first, winner.second};
  for (const ChannelFinding& f : out.channels)
    out.credit_lost = out.credit_lost || (f.credit_lost && out.link && *f.link == *out.link);
}

}  // namespace

RingFinding RingProgressAnalysis::analyze(const std::string& comm, std::optional<uint64_t> seq, int comm_size) const {
  RingFinding out;
  RingViews views;
  views.comm_size = comm_size;
  for (const RingProgress* record : records_) {
    const RingProgress& r = *record;
    // A record whose seq its reader could not tell joins only the seq-less pass.
    if (r.comm != comm || (seq && (!r.seq_known || r.seq != *seq))) continue;
    if (r.rank < 0) continue;  // a reader that could not tell whose record it is
    addViews(r, to_global_, views);
  }
  if (views.channels.empty()) {
    out.note = "no ring progress records for this collective";
    return out;
  }
  std::map<std::pair<int, int>, int> link_votes;  // (from, to) for links; (rank, -1) for ranks
  std::set<std::pair<int, int>> unseen, least;
  for (const auto& [ch, conns] : views.channels) {
    ChannelFinding f = analyzeChannel(ch, conns);
    std::vector<Link> lost;
    for (const auto& [key, c] : conns)
      if (creditLost(c)) lost.push_back({key.first, key.second});
    if (lost.size() == 1) {
      f.link = lost.front();
      f.rank.reset();
      f.credit_lost = true;
    }
    if (f.link) ++link_votes[{f.link->from, f.link->to}];
    if (f.rank) ++link_votes[{*f.rank, -1}];
    if (!f.link && !f.rank && static_cast<int>(f.minimal.size()) < f.connections) {
      for (const Link& l : f.minimal) least.insert({l.from, l.to});
    }
    for (const Link& l : unseenConnections(views.ring_of[ch], views.comm_size, views.seen_of[ch])) {
      Link g{to_global_(l.from), l.to < 0 ? -1 : to_global_(l.to)};
      f.unseen.push_back(g);
      unseen.insert({g.from, g.to});
    }
    out.channels.push_back(std::move(f));
  }
  for (const auto& [from, to] : unseen) out.unseen.push_back({from, to});
  for (const auto& [from, to] : least) out.least_seen.push_back({from, to});
  out.channels_total = static_cast<int>(out.channels.size());
  vote(link_votes, out);
  return out;
}

}  // namespace hangwatch::verdict
