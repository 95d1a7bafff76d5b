#include "hangwatch/watchdog/metrics/busy_timeline.h"

#include <algorithm>

namespace hangwatch::watchdog {
namespace {

// Boundaries are only passed when idle gaps are folded; a job without gaps would keep
// them all, so keep at most this many (older ones only cut steps with no gap anyway).
constexpr size_t kMaxPendingBoundaries = 1024;

}  // namespace

BusyTimeline::BusyTimeline(int64_t window_start_ns, size_t max_open_intervals)
    : max_open_(std::max<size_t>(max_open_intervals, 1)), folded_until_(window_start_ns) {}

void BusyTimeline::add(int64_t start_ns, int64_t end_ns) {
  start_ns = std::max(start_ns, folded_until_);
  if (end_ns <= start_ns) return;
  // First open interval that ends at or after the new one's start: it and the following
  // ones that start at or before the new end overlap it and merge into it.
  auto first = std::lower_bound(open_.begin(), open_.end(), start_ns,
                                [](const Interval& iv, int64_t t) { return iv.end < t; });
  auto last = first;
  Interval merged{start_ns, end_ns};
  while (last != open_.end() && last->start <= end_ns) {
    merged.start = std::min(merged.start, last->start);
    merged.end = std::max(merged.end, last->end);
    ++last;
  }
  auto pos = open_.erase(first, last);
  open_.insert(pos, merged);
  while (open_.size() > max_open_) foldOldest();
}

void BusyTimeline::addStepBoundary(int64_t t_ns) {
  auto pos = std::upper_bound(boundaries_.begin(), boundaries_.end(), t_ns);
  boundaries_.insert(pos, t_ns);
  if (boundaries_.size() > kMaxPendingBoundaries) boundaries_.pop_front();
}

void BusyTimeline::foldOldest() {
  Interval iv = open_.front();
  open_.erase(open_.begin());
  fold(iv);
}

void BusyTimeline::fold(Interval iv) {
  if (iv.start > folded_until_) gap(folded_until_, iv.start - folded_until_);
  busy_ns_ += iv.end - iv.start;
  folded_until_ = iv.end;
}

void BusyTimeline::gap(int64_t start_ns, int64_t length_ns) {
  // A boundary at the gap's start (the anchor op just ended) opens the step the gap is in.
  passBoundariesUpTo(start_ns);
  void_ns_ += length_ns;
  step_longest_gap_ = std::max(step_longest_gap_, length_ns);
}

void BusyTimeline::passBoundariesUpTo(int64_t t_ns) {
  while (!boundaries_.empty() && boundaries_.front() <= t_ns) {
    boundaries_.pop_front();
    inter_step_void_ns_ += step_longest_gap_;
    step_longest_gap_ = 0;
    boundary_in_window_ = true;
  }
}

BusyTimeline::WindowTotals BusyTimeline::closeWindow(int64_t end_ns) {
  while (!open_.empty() && open_.front().end <= end_ns) foldOldest();
  if (!open_.empty() && open_.front().start < end_ns) {
    fold({open_.front().start, end_ns});
    open_.front().start = end_ns;
  }
  if (end_ns > folded_until_) gap(folded_until_, end_ns - folded_until_);
  passBoundariesUpTo(end_ns);
  // Folding for the open-interval cap may have run past the window's end; that busy
  // time belongs to the next window.
  int64_t carry = folded_until_ > end_ns ? folded_until_ - end_ns : 0;
  busy_ns_ -= carry;

  WindowTotals totals;
  totals.busy_ns = busy_ns_;
  totals.void_ns = void_ns_;
  // The step in progress contributes its longest gap so far; the rest of it belongs to
  // the next window.
  if (boundary_in_window_) totals.inter_step_void_ns = inter_step_void_ns_ + step_longest_gap_;

  folded_until_ = std::max(folded_until_, end_ns);
  busy_ns_ = carry;
  void_ns_ = 0;
  inter_step_void_ns_ = 0;
  step_longest_gap_ = 0;
  boundary_in_window_ = false;
  return totals;
}

}  // namespace hangwatch::watchdog
