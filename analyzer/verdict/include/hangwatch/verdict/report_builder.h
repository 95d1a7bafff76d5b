#pragma once
// Turns what JobLoader read into a Report: stack classes across ranks, then the verdict.
#include "hangwatch/verdict/job_data.h"
#include "hangwatch/verdict/report.h"

namespace hangwatch::verdict {

class ReportBuilder {
 public:
  static Report build(JobData job);
};

}  // namespace hangwatch::verdict
