#pragma once
// `forensics timeline`: every rank's timeline/rNNNNN.json as one Chrome trace (opens in
// Perfetto and chrome://tracing). One process per rank, one thread per stream plus a
// "host" thread with launch points and synchronizations; a collective's instances on
// all ranks are joined by a flow arrow (communicator + sequence number). The critical path,
// when given, is a track of its own above the ranks.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/timeline_window.h"
#include "hangwatch/slowdown/critical_path.h"

namespace hangwatch::slowdown {

class ChromeTrace {
 public:
  // `last_s` > 0 keeps only the last `last_s` seconds before the newest op of the job.
  explicit ChromeTrace(double last_s = 0) : last_s_(last_s) {}
  void addRank(const TimelineWindow& w);
  // Its own track: every analysed step's critical path, one slice per segment.
  void addCriticalPath(const CriticalPathAnalysis& a) { critical_path_ = a; }
  nlohmann::json build() const;

 private:
  double last_s_;
  std::vector<TimelineWindow> ranks_;
  std::optional<CriticalPathAnalysis> critical_path_;
};

}  // namespace hangwatch::slowdown
