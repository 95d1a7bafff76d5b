// slow-link (from bus bandwidth): a communicator slower than its peers or than the
// baseline; network tomography over the slow and healthy rings names the link when it can.
#include <algorithm>
#include <iterator>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/slowdown/communicator_bandwidth.h"
#include "hangwatch/slowdown/detector.h"
#include "hangwatch/slowdown/robust_stats.h"

namespace hangwatch::slowdown {
namespace {

using Links = std::set<std::pair<int, int>>;

struct Slow {
  const CommBandwidth* bw;
  double reference;
  std::string against;
};

struct Judged {
  std::vector<Slow> slow;
  std::set<std::string> slow_comms, judged_ok;
};

Judged judge(const DetectorInput& in, const std::vector<CommBandwidth>& bws, const std::vector<CommBandwidth>& base) {
  Judged out;
  for (const CommBandwidth& b : bws) {
    // Peers: other communicators running the same collective on the same size and bytes.
    std::vector<double> peers;
    for (const CommBandwidth& o : bws)
      if (o.key.comm != b.key.comm && o.key.name == b.key.name && o.key.bytes == b.key.bytes &&
          o.comm_size == b.comm_size)
        peers.push_back(o.busbw_gbps);
    std::optional<Slow> verdict;
    bool judged = false;
    if (!peers.empty()) {
      judged = true;
      double ref = median(peers);
      if (b.busbw_gbps < in.t.link_ratio * ref)
        verdict = Slow{&b, ref, fmt::format("the median of {} communicator(s) running the same collective", peers.size())};
    }
    for (const CommBandwidth& o : base) {
      // Hashes differ between runs: match the same members, collective and size.
      if (o.key.name != b.key.name || o.key.bytes != b.key.bytes || o.members != b.members || b.members.empty())
        continue;
      judged = true;
      if (!verdict && b.busbw_gbps < in.t.baseline_link_ratio * o.busbw_gbps)
        verdict = Slow{&b, o.busbw_gbps, "the baseline run"};
    }
    if (verdict) {
      out.slow.push_back(*verdict);
      out.slow_comms.insert(b.key.comm);
    } else if (judged) {
      out.judged_ok.insert(b.key.comm);
    }
  }
  return out;
}

// Network tomography over ring links: a link on every slow ring and on no healthy one.
Links tomography(const JobProfile& job, const Judged& j) {
  Links candidates;
  bool first = true;
  for (const std::string& c : j.slow_comms) {
    auto it = job.communicators().find(c);
    std::vector<std::pair<int, int>> links = it != job.communicators().end() ? it->second.ringLinks()
                                                                            : std::vector<std::pair<int, int>>{};
    Links mine(links.begin(), links.end());
    if (first) {
      candidates = mine;
      first = false;
    } else {
      Links both;
      std::set_intersection(candidates.begin(), candidates.end(), mine.begin(), mine.end(),
                            std::inserter(both, both.begin()));
      candidates = both;
    }
  }
  for (const std::string& c : j.judged_ok) {
    auto it = job.communicators().find(c);
    if (it == job.communicators().end()) continue;
    for (const auto& l : it->second.ringLinks()) candidates.erase(l);
  }
  return candidates;
}

// A slow communicator whose ring holds a link already named from its wire time is
// explained by it: one finding per link, the communicator's slowdown as its evidence.
SlowdownFinding* namedOnRing(const JobProfile& job, SlowdownAnalysis& out, const std::string& comm) {
  auto c = job.communicators().find(comm);
  if (c == job.communicators().end()) return nullptr;
  const std::vector<std::pair<int, int>> ring = c->second.ringLinks();
  for (SlowdownFinding& f : out.findings)
    if (f.kind == "slow-link" && f.link &&
        std::find(ring.begin(), ring.end(), std::make_pair(f.link->from, f.link->to)) != ring.end())
      return &f;
  return nullptr;
}

SlowdownFinding slowCommunicator(const Slow& s) {
  SlowdownFinding f;
  f.kind = "slow-link";
  f.ranks = s.bw->members;
  f.communicator = s.bw->key.comm;
  f.metric = fmt::format("busbw_gbps[{} {}B]", s.bw->key.name, s.bw->key.bytes);
  f.value = s.bw->busbw_gbps;
  f.group_median = s.reference;
  f.owner = "operations";
  f.evidence.push_back(fmt::format("communicator {} ({} ranks) moves {} at {:.3g} GB/s bus bandwidth against {:.3g} GB/s for {}",
                                   s.bw->key.comm, s.bw->comm_size, s.bw->key.name, s.bw->busbw_gbps, s.reference,
                                   s.against));
  if (s.bw->instances > 0)
    f.evidence.push_back(fmt::format(
        "timed from the last member's start to the median member's end over {} aligned instances, so late ranks are "
        "not counted",
        s.bw->instances));
  return f;
}

void explain(SlowdownFinding& f, const std::optional<RingLink>& named, const Links& candidates,
             const std::vector<Slow>& slow, std::set<std::string>& reported) {
  if (named) {
    f.link = named;
    f.evidence.push_back(fmt::format(
        "link {}->{} is the only ring link shared by every slow communicator and by no healthy one", named->from,
        named->to));
    for (const Slow& other : slow)
      if (reported.insert(other.bw->key.comm).second)
        f.evidence.push_back(fmt::format("communicator {} ({} ranks) is slow too: {} at {:.3g} GB/s against {:.3g}",
                                         other.bw->key.comm, other.bw->comm_size, other.bw->key.name,
                                         other.bw->busbw_gbps, other.reference));
    f.ranks = {named->from, named->to};
    return;
  }
  std::vector<std::string> list;
  for (const auto& [a, b] : candidates) list.push_back(fmt::format("{}->{}", a, b));
  f.evidence.push_back(
      "a ring runs at its slowest link, so every member sees the same bandwidth; the link cannot be singled out from "
      "these communicators" +
      (list.empty() ? std::string() : fmt::format(" (candidates: {})", fmt::join(list, ", "))));
}

}  // namespace

void detectSlowLinks(const DetectorInput& in, SlowdownAnalysis& out) {
  const std::vector<CommBandwidth> bws = communicatorBandwidth(in.job);
  const std::vector<CommBandwidth> base = in.baseline ? communicatorBandwidth(*in.baseline) : std::vector<CommBandwidth>{};
  Judged j = judge(in, bws, base);
  const Links candidates = tomography(in.job, j);
  // Named link: one finding for it, on the communicator that slowed down most.
  std::optional<RingLink> named;
  if (candidates.size() == 1) named = RingLink{candidates.begin()->first, candidates.begin()->second};
  std::sort(j.slow.begin(), j.slow.end(), [](const Slow& a, const Slow& b) {
    return a.bw->busbw_gbps / a.reference < b.bw->busbw_gbps / b.reference;
  });
  std::set<std::string> reported;
  for (const Slow& s : j.slow) {
    if (!reported.insert(s.bw->key.comm).second) continue;
    if (SlowdownFinding* link = namedOnRing(in.job, out, s.bw->key.comm)) {
      link->evidence.push_back(fmt::format(
          "communicator {} ({} ranks), whose ring holds it, moves {} at {:.3g} GB/s bus bandwidth against {:.3g} GB/s "
          "for {}",
          s.bw->key.comm, s.bw->comm_size, s.bw->key.name, s.bw->busbw_gbps, s.reference, s.against));
      continue;
    }
    SlowdownFinding f = slowCommunicator(s);
    explain(f, named, candidates, j.slow, reported);
    out.findings.push_back(std::move(f));
  }
}

}  // namespace hangwatch::slowdown
