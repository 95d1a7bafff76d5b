#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <utility>
#include <vector>

#include "hangwatch/watchdog/metrics/busy_timeline.h"

using hangwatch::watchdog::BusyTimeline;

namespace {

// Exact union length of intervals clipped to [lo, hi), the reference the timeline must match.
int64_t unionLength(std::vector<std::pair<int64_t, int64_t>> v, int64_t lo, int64_t hi) {
  std::sort(v.begin(), v.end());
  int64_t total = 0, cur_start = 0, cur_end = lo;
  bool open = false;
  for (auto [s, e] : v) {
    s = std::max(s, lo);
    e = std::min(e, hi);
    if (e <= s) continue;
    if (open && s <= cur_end) {
      cur_end = std::max(cur_end, e);
    } else {
      if (open) total += cur_end - cur_start;
      cur_start = s;
      cur_end = e;
      open = true;
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

}  // namespace

TEST_CASE("OverlappingKernelsOnTwoStreamsCountOnceAsBusy") {
  BusyTimeline t(0);
  // Stream 1: [0,100) and [200,300); stream 2: [50,150) and [400,450), arriving by end time.
  t.add(0, 100);
  t.add(50, 150);
  t.add(200, 300);
  t.add(400, 450);
  auto w = t.closeWindow(1000);
  CHECK(w.busy_ns == 150 + 100 + 50);
  CHECK(w.void_ns == 1000 - 300);
  CHECK_FALSE(w.inter_step_void_ns);
}

namespace {

// Two serial streams with random kernel lengths and gaps, interleaved.
std::vector<std::pair<int64_t, int64_t>> twoStreams(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int64_t> len(1, 400), gapd(0, 300);
  std::vector<std::pair<int64_t, int64_t>> all;
  int64_t next[2] = {0, 37};
  for (int i = 0; i < n; ++i) {
    int s = i % 2;
    int64_t start = next[s] + gapd(rng);
    next[s] = start + len(rng);
    all.push_back({start, next[s]});
  }
  return all;
}

}  // namespace

TEST_CASE("BusyTimeMatchesTheExactUnionUnderTheOpenIntervalCap") {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<size_t> lateness(0, 3);
  for (size_t cap : {size_t{8}, size_t{64}}) {
    BusyTimeline t(0, cap);
    auto all = twoStreams(rng, 2000);
    std::sort(all.begin(), all.end(), [](auto a, auto b) { return a.second < b.second; });
    // Completions reach the poller in end order, give or take a few ops.
    std::vector<std::pair<int64_t, int64_t>> pending;
    int64_t last_end = 0;
    for (auto iv : all) {
      pending.push_back(iv);
      last_end = std::max(last_end, iv.second);
      if (pending.size() > lateness(rng)) {
        std::shuffle(pending.begin(), pending.end(), rng);
        for (auto [a, b] : pending) t.add(a, b);
        pending.clear();
      }
    }
    for (auto [a, b] : pending) t.add(a, b);
    INFO("cap " << cap);
    CHECK(t.openIntervals() <= cap);
    auto w = t.closeWindow(last_end + 100);
    CHECK(w.busy_ns == unionLength(all, 0, last_end + 100));
    CHECK(w.busy_ns + w.void_ns == last_end + 100);
  }
}

TEST_CASE("AnOpRunningAcrossTheWindowEndIsSplitBetweenWindows") {
  std::mt19937_64 rng(5);
  auto all = twoStreams(rng, 2000);
  std::sort(all.begin(), all.end(), [](auto a, auto b) { return a.second < b.second; });
  int64_t cut = all[all.size() / 2].second + 1;
  BusyTimeline t(0, 16);
  bool closed = false;
  BusyTimeline::WindowTotals w1;
  // Ops are reported when they end; the window closes at `cut`, before later ends arrive.
  for (auto [a, b] : all) {
    if (!closed && b > cut) {
      w1 = t.closeWindow(cut);
      closed = true;
    }
    t.add(a, b);
  }
  int64_t end = all.back().second;
  auto w2 = t.closeWindow(end);
  CHECK(w1.busy_ns == unionLength(all, 0, cut));
  CHECK(w1.busy_ns + w1.void_ns == cut);
  CHECK(w2.busy_ns == unionLength(all, cut, end));
  CHECK(w2.busy_ns + w2.void_ns == end - cut);
}

TEST_CASE("LateIntervalsAreClippedToTheWindowAlreadyAccounted") {
  BusyTimeline t(0);
  t.add(100, 200);
  auto w1 = t.closeWindow(1000);
  CHECK(w1.busy_ns == 100);
  t.add(900, 1100);  // started in the closed window: only its part in the new one counts
  auto w2 = t.closeWindow(2000);
  CHECK(w2.busy_ns == 100);
  CHECK(w2.void_ns == 900);
}

TEST_CASE("LongestGapOfEachStepIsInterStepVoid") {
  BusyTimeline t(0);
  // Step 1 ends at 300 (boundary), step 2 at 1300. Inside step 2: a 400 ns dataloader gap
  // after the boundary and a 50 ns gap between kernels.
  t.add(0, 100);
  t.add(120, 300);  // gap 20 inside step 1
  t.addStepBoundary(300);
  t.add(700, 900);  // gap 400: dataloader
  t.add(950, 1300); // gap 50: between kernels
  t.addStepBoundary(1300);
  t.add(1300, 2000);
  auto w = t.closeWindow(2000);
  CHECK(w.void_ns == 20 + 400 + 50);
  REQUIRE(w.inter_step_void_ns);
  CHECK(*w.inter_step_void_ns == 20 + 400);
}
