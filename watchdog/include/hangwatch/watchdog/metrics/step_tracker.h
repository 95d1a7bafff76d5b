#pragma once
// Where training steps end. Told explicitly (markStep, e.g. from a future Python hook)
// or inferred: the anchor is the collective key (name, communicator, bytes) on the
// largest communicator, largest payload first; each completion of the anchor ends a
// step. When the anchor runs several times per step the "step" is that sub-period,
// which the window line says by naming the anchor.
#include <cstdint>
#include <optional>
#include <string>

#include "hangwatch/common/log_histogram.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/watchdog/metrics/op_record.h"

namespace hangwatch::watchdog {

class StepTracker {
 public:
  // The step boundary this op makes, if it completes the anchor.
  std::optional<int64_t> observe(const CompletedOp& op);
  // An explicit step end; from the first one on, the anchor is ignored.
  int64_t markStep(int64_t end_ns);

  std::optional<StepStats> windowStats() const;
  void clearWindow();

 private:
  void addStep(int64_t end_ns);

  bool markers_ = false;
  std::string anchor_name_;
  uint64_t anchor_comm_ = 0;
  int anchor_size_ = 0;
  uint64_t anchor_bytes_ = 0;
  std::optional<int64_t> last_end_;
  uint64_t count_ = 0;
  int64_t total_ns_ = 0;
  int64_t max_ns_ = 0;
  LogHistogram durations_;
};

}  // namespace hangwatch::watchdog
