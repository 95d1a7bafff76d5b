#pragma once
// One detector is one pass over the job's profile (and the healthy baseline, when
// given): it reads what earlier passes found and appends its own findings and notes.
// SlowdownAnalyzer runs them in a fixed order (analyzer/slowdown/README.md).
#include <string>
#include <vector>

#include "hangwatch/slowdown/job_profile.h"
#include "hangwatch/slowdown/slowdown_analyzer.h"

namespace hangwatch::slowdown {

struct DetectorInput {
  const JobProfile& job;
  const JobProfile* baseline;  // null without --baseline
  const SlowdownThresholds& t;
};

using Detector = void (*)(const DetectorInput& in, SlowdownAnalysis& out);

void detectSlowGpus(const DetectorInput& in, SlowdownAnalysis& out);
void detectIssueStalls(const DetectorInput& in, SlowdownAnalysis& out);
void detectHostAndDataloaderStalls(const DetectorInput& in, SlowdownAnalysis& out);
void detectIntraStepVoid(const DetectorInput& in, SlowdownAnalysis& out);
void detectBottleneckLinks(const DetectorInput& in, SlowdownAnalysis& out);
void detectSlowLinks(const DetectorInput& in, SlowdownAnalysis& out);
void detectBaselineShifts(const DetectorInput& in, SlowdownAnalysis& out);

// Shared by the detectors.
std::string rankName(const RankProfile& p);
// One rank gets at most one rank finding: a later pass skips a rank already named.
bool alreadyFlagged(const SlowdownAnalysis& out, int rank);
double p50Ns(const LogHistogram& h);

}  // namespace hangwatch::slowdown
