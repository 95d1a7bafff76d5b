#include "hangwatch/verdict/graph_progress_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "hangwatch/verdict/ring_progress_analysis.h"

namespace hangwatch::verdict {
namespace {

// One connection X->Y of a channel as its two ends reported it (communicator ranks).
struct Edge {
  std::optional<RingConnection> send;  // X's end: its posted steps, Y's head as X read it
  std::optional<RingConnection> recv;  // Y's end: X's tail as Y read it, Y's consumed steps
};

// What a blocked end waits for: a receiver for data on `edge`, a sender for a free slot on it.
struct Wait {
  int rank = 0;
  std::pair<int, int> edge;
  bool for_data = true;
};

// The sender posted steps the receiver never saw (both absolute counters of the same steps).
bool dataLost(const Edge& e) {
  if (!e.send || !e.recv || !e.send->posted_step || !e.recv->observed_known) return false;
  return *e.send->posted_step > e.recv->observed_step;
}

class ChannelWalk {
 public:
  ChannelWalk(const std::map<std::pair<int, int>, Edge>& edges, const std::map<int, std::vector<Wait>>& waits,
              const std::set<int>& read_here, const std::set<int>& read_op, const std::function<bool(int)>& finished,
              const std::function<int(int)>& to_global)
      : edges_(edges), waits_(waits), read_here_(read_here), read_op_(read_op), finished_(finished),
        to_global_(to_global) {}

  // Every place the chain of waits from `w` ends.
  std::vector<GraphStop> follow(const Wait& w) {
    visited_.clear();
    found_.clear();
    explore(w);
    return found_;
  }

 private:
  Link global(int from, int to) const { return Link{to_global_(from), to_global_(to)}; }

  void explore(const Wait& w) {
    const auto [x, y] = w.edge;
    auto it = edges_.find(w.edge);
    if (it != edges_.end()) {
      const Edge& e = it->second;
      if (e.send && e.recv && clearToSendLost(*e.send, *e.recv)) return stop(GraphStop::Kind::kCreditLost, x, y, e);
      if (dataLost(e)) return stop(GraphStop::Kind::kDataLost, x, y, e);
    }
    // Only the other end can satisfy the wait: the sender's data, the receiver's freed slot.
    visit(w.for_data ? x : y, w);
  }

  void visit(int rank, const Wait& via) {
    if (!visited_.insert(rank).second) return;
    auto mine = waits_.find(rank);
    if (mine != waits_.end() && !mine->second.empty()) {
      for (const Wait& w : mine->second) explore(w);
      return;
    }
    const auto [x, y] = via.edge;
    const bool done_here = read_op_.count(rank) && !read_here_.count(rank);
    if (read_here_.count(rank)) {
      // Inside the collective on this channel, blocked on none of its connections.
      GraphStop s;
      s.kind = GraphStop::Kind::kRankStopped;
      s.rank = to_global_(rank);
      add(s);
    } else if (done_here || finished_(rank)) {
      // It finished its part (this channel, or the whole collective): what the waiting end
      // needs from it was sent, or the slot was freed, and never arrived.
      add(GraphStop{via.for_data ? GraphStop::Kind::kSenderFinished : GraphStop::Kind::kCreditLost,
                    global(x, y), std::nullopt});
    } else {
      GraphStop s;
      s.kind = GraphStop::Kind::kRankUnread;
      s.rank = to_global_(rank);
      add(s);
    }
  }

  void stop(GraphStop::Kind kind, int x, int y, const Edge& e) {
    GraphStop s{kind, global(x, y), std::nullopt};
    if (kind == GraphStop::Kind::kDataLost) {
      const uint64_t base = e.send->base_step.value_or(0);
      s.posted = *e.send->posted_step - std::min(base, *e.send->posted_step);
      s.delivered = e.recv->observed_step - std::min(base, e.recv->observed_step);
    }
    add(s);
  }

  void add(const GraphStop& s) {
    for (GraphStop& f : found_)
      if (f.sameAs(s)) return;
    found_.push_back(s);
  }

  const std::map<std::pair<int, int>, Edge>& edges_;
  const std::map<int, std::vector<Wait>>& waits_;
  const std::set<int>& read_here_;
  const std::set<int>& read_op_;
  const std::function<bool(int)>& finished_;
  const std::function<int(int)>& to_global_;
  std::set<int> visited_;
  std::vector<GraphStop> found_;
};

struct ChannelData {
  std::map<std::pair<int, int>, Edge> edges;
  std::map<int, std::vector<Wait>> waits;
  std::set<int> read;  // ranks with a record on this channel
};

std::string stopText(const GraphStop& s) {
  if (s.link) return fmt::format("{} -> {}", s.link->from, s.link->to);
  return fmt::format("rank {}{}", *s.rank, s.kind == GraphStop::Kind::kRankUnread ? " (not read)" : "");
}

// Every place a channel's waits end, each with how many waits end there.
GraphChannel channelStops(int channel, const std::map<int, std::vector<Wait>>& waits, ChannelWalk& walk) {
  GraphChannel gc;
  gc.channel = channel;
  for (const auto& [rank, mine] : waits) {
    for (const Wait& w : mine) {
      for (const GraphStop& s : walk.follow(w)) {
        auto same = std::find_if(gc.stops.begin(), gc.stops.end(), [&](const GraphStop& f) { return f.sameAs(s); });
        if (same == gc.stops.end()) same = gc.stops.insert(gc.stops.end(), s);
        ++same->waits;
      }
    }
  }
  return gc;
}

// A channel names what all of its waits end at (a rank nothing was read of may hide the stop);
// the culprit is what most channels name, unless two tie.
void decide(GraphFinding& out) {
  std::map<std::string, std::pair<int, GraphStop>> votes;
  std::set<int> unread;
  std::vector<GraphStop> everywhere;
  for (const GraphChannel& gc : out.channels) {
    for (const GraphStop& s : gc.stops) {
      if (s.kind == GraphStop::Kind::kRankUnread) unread.insert(*s.rank);
      if (std::none_of(everywhere.begin(), everywhere.end(), [&](const GraphStop& f) { return f.sameAs(s); }))
        everywhere.push_back(s);
    }
    if (gc.stops.size() == 1 && gc.stops.front().kind != GraphStop::Kind::kRankUnread) {
      auto& vote = votes[stopText(gc.stops.front())];
      if (vote.first++ == 0) vote.second = gc.stops.front();
    }
  }
  out.channels_total = static_cast<int>(out.channels.size());
  out.unread.assign(unread.begin(), unread.end());
  int best = 0, tied = 0;
  const GraphStop* winner = nullptr;
  for (const auto& [key, vote] : votes) {
    if (vote.first > best) {
      best = vote.first;
      winner = &vote.second;
      tied = 0;
    } else if (vote.first == best) {
      ++tied;
    }
  }
  if (winner != nullptr && tied == 0) {
    out.channels_agree = best;
    out.stop = *winner;
    out.link = winner->link;
    out.rank = winner->rank;
    return;
  }
  out.several = everywhere;
  std::vector<std::string> places;
  for (const GraphStop& s : everywhere) places.push_back(stopText(s));
  out.note = places.empty() ? "no thread waits on any of the collective's connections"
                            : fmt::format("the waits on the {} connections end in more than one place: {}",
                                          out.algorithm.empty() ? "algorithm's" : out.algorithm,
                                          fmt::join(places, ", "));
}

}  // namespace

GraphFinding GraphProgressAnalysis::analyze(const std::string& comm, std::optional<uint64_t> seq) const {
  GraphFinding out;
  std::map<int, ChannelData> channels;
  std::set<int> read_op;
  // The collective's records; where none says its sequence number, those that cannot say
  // (NCCL's memory does not hold the watchdog's seq: the cuda-gdb reader's) stand for it.
  auto ofThisOp = [&](const RingProgress& r, bool unknown_seq) {
    if (r.comm != comm || r.rank < 0 || r.channel < 0) return false;
    if (!seq) return true;
    return unknown_seq ? !r.seq_known : r.seq_known && r.seq == *seq;
  };
  const bool by_seq =
      std::any_of(records_.begin(), records_.end(), [&](const RingProgress* r) { return ofThisOp(*r, false); });
  for (const RingProgress* record : records_) {
    const RingProgress& r = *record;
    if (!ofThisOp(r, !by_seq)) continue;
    if (out.algorithm.empty() && r.algorithm != "RING") out.algorithm = r.algorithm;
    ChannelData& ch = channels[r.channel];
    // A record with no debugger's view of the rank's waits (NCCL's host memory alone: no
    // kernel thread was found waiting) says nothing of whether the rank waits: not read.
    const bool waits_seen = r.source != "nccl-host";
    if (waits_seen) {
      ch.read.insert(r.rank);
      read_op.insert(r.rank);
    }
    for (const RingConnection& c : r.connections) {
      if (c.peer < 0) continue;
      const bool recv = c.direction == "recv";
      const std::pair<int, int> key = recv ? std::pair{c.peer, r.rank} : std::pair{r.rank, c.peer};
      Edge& e = ch.edges[key];
      (recv ? e.recv : e.send) = c;
      if (c.waiting) ch.waits[r.rank].push_back(Wait{r.rank, key, recv});
    }
  }
  if (channels.empty()) {
    out.note = "no records of this collective's connections";
    return out;
  }
  for (auto& [number, ch] : channels) {
    ChannelWalk walk(ch.edges, ch.waits, ch.read, read_op, finished_, to_global_);
    out.channels.push_back(channelStops(number, ch.waits, walk));
  }
  decide(out);
  return out;
}

}  // namespace hangwatch::verdict
