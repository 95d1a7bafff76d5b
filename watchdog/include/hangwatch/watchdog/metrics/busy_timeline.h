#pragma once
// GPU busy and void (idle) time of one window. Busy is the length of the union of the
// ops' [gpu start, gpu end] intervals over all streams, clipped to the window; void is
// the rest. Ops complete roughly in time order, so only the most recent intervals are
// kept open (merged, disjoint); older ones are folded into the totals. An interval that
// reaches back before what was folded (or before the window) is clipped there.
//
// Inter-step void: the idle gaps are cut into steps at the step boundaries; the
// longest gap of each step (per window) is the inter-step void (a dataloader or host
// stall shows up there); the other gaps are idle between kernels inside the step. A
// step cut by a window edge counts its longest gap on each side, one step per window.
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace hangwatch::watchdog {

class BusyTimeline {
 public:
  explicit BusyTimeline(int64_t window_start_ns, size_t max_open_intervals = 256);

  void add(int64_t start_ns, int64_t end_ns);
  void addStepBoundary(int64_t t_ns);

  struct WindowTotals {
    int64_t busy_ns = 0;
    int64_t void_ns = 0;
    std::optional<int64_t> inter_step_void_ns;  // none without a step boundary in the window
  };
  // Closes the window at `end_ns`; the next one starts there. Intervals reaching past
  // `end_ns` carry their remainder over.
  WindowTotals closeWindow(int64_t end_ns);

  size_t openIntervals() const { return open_.size(); }

 private:
  struct Interval {
    int64_t start, end;
  };

  void foldOldest();
  void fold(Interval iv);
  void gap(int64_t start_ns, int64_t length_ns);
  void passBoundariesUpTo(int64_t t_ns);

  size_t max_open_;
  std::vector<Interval> open_;     // sorted, disjoint, none starts before folded_until_
  int64_t folded_until_;           // everything before this is accounted for
  int64_t busy_ns_ = 0;
  int64_t void_ns_ = 0;
  std::deque<int64_t> boundaries_; // sorted, not yet passed by folding
  int64_t step_longest_gap_ = 0;   // of the step in progress, this window
  int64_t inter_step_void_ns_ = 0;
  bool boundary_in_window_ = false;
};

}  // namespace hangwatch::watchdog
