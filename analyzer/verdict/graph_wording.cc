// The wording of a verdict read off a tree's or PAT's own graph.
#include "hangwatch/verdict/verdict_wording.h"

#include <fmt/format.h>

#include "wording_text.h"

namespace hangwatch::verdict {

using namespace wording;

void VerdictWording::graphLinkCulprit(Verdict& v, const RingFacts& facts) const {
  const GraphStop& s = *facts.graph->stop;
  const Link& l = *s.link;
  linkCulprit(v, facts.focus, l);
  std::string why;
  switch (s.kind) {
    case GraphStop::Kind::kDataLost:
      why = fmt::format("rank {} posted {} step(s) of this collective on it that rank {} never saw ({} arrived), and "
                        "rank {} waits for them",
                        l.from, s.posted, l.to, s.delivered, l.to);
      break;
    case GraphStop::Kind::kCreditLost:
      why = fmt::format("rank {} took every step rank {} posted and waits for the next, while rank {} waits for a "
                        "clear-to-send for a slot rank {} already freed: the credit was lost on the link",
                        l.to, l.from, l.from, l.to);
      break;
    default:
      why = fmt::format("rank {} waits for data from rank {}, which finished its part of the collective (it posted "
                        "everything): the data was lost on the link",
                        l.to, l.from);
      break;
  }
  v.evidence.push_back(fmt::format("On {} every wait on the {}'s connections (parents, children, peers) ends at the "
                                   "link {} -> {}: {}.",
                                   channels(v, facts), facts.graph->algorithm, l.from, l.to, why));
}

void VerdictWording::graphRankCulprit(Verdict& v, const RingFacts& facts) const {
  const HangFocus& f = facts.focus;
  const int rank = *facts.ring.rank;
  v.headline = fmt::format("Communication hang: {} stopped making progress inside {}; its peers wait on it.",
                           who(f.comm, rank), opText(f));
  v.evidence.push_back(fmt::format(
      "On {} every wait on the {}'s connections ends at rank {}: its peers wait on it for data or for a free slot, "
      "and none of its own threads waits on any connection, so its GPU stopped inside the collective.",
      channels(v, facts), facts.graph->algorithm, rank));
  rankCulpritSteps(v, rank);
}

void VerdictWording::graphRead(Verdict& v, const RingFacts& facts) const {
  v.evidence.push_back(fmt::format(
      "NCCL ran {} on communicator {}: the debugger read every connection of the collective on that algorithm's "
      "graph (each rank's parent and children, or peers), not a ring.",
      facts.graph->algorithm.empty() ? std::string("another algorithm than RING") : facts.graph->algorithm,
      facts.focus.comm));
}

}  // namespace hangwatch::verdict
