#include "hangwatch/slowdown/slowdown_finding.h"

namespace hangwatch::slowdown {

nlohmann::json toJson(const SlowdownFinding& f) {
  nlohmann::json link = nullptr;
  if (f.link) link = {{"from", f.link->from}, {"to", f.link->to}};
  return {{"kind", f.kind},
          {"ranks", f.ranks},
          {"link", link},
          {"communicator", f.communicator.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.communicator)},
          {"metric", f.metric},
          {"value", f.value},
          {"group_median", f.group_median},
          {"owner", f.owner},
          {"evidence", f.evidence}};
}

}  // namespace hangwatch::slowdown
