#pragma once
// `forensics report --format json` (DESIGN.md §5, contract: verdict.kind, culprit_ranks,
// culprit_link, communicator, op, evidence; ranks_missing; stack_classes).
#include <nlohmann/json.hpp>

#include "hangwatch/verdict/report.h"

namespace hangwatch::verdict {

class JsonReportWriter {
 public:
  static nlohmann::json toJson(const Report& r);
};

}  // namespace hangwatch::verdict
