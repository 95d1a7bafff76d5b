#include <catch2/catch.hpp>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "hangwatch/watchdog/metrics/link_meter.h"

using hangwatch::watchdog::LinkMeter;

// NCCL's proxy threads (simnccl: its channel threads) add steps while the poller drains
// windows: nothing is lost or counted twice (and ThreadSanitizer sees no race).
TEST_CASE("StepsAddedFromSeveralThreadsWhileThePollerDrainsAreAllCounted") {
  LinkMeter m;
  constexpr int kThreads = 4;
  constexpr int kSteps = 5000;
  std::atomic<bool> done{false};
  uint64_t drained_bytes = 0, drained_steps = 0;
  std::thread poller([&] {
    while (!done.load()) {
      for (const auto& l : m.drain()) {
        drained_bytes += l.bytes;
        drained_steps += l.steps;
      }
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> channels;
  for (int t = 0; t < kThreads; ++t)
    channels.emplace_back([&m, t] {
      for (int s = 0; s < kSteps; ++s) m.add({7, 4, 0, 1 + t % 2}, 64, s * 10, s * 10 + 5);
    });
  for (auto& c : channels) c.join();
  done.store(true);
  poller.join();
  for (const auto& l : m.drain()) {
    drained_bytes += l.bytes;
    drained_steps += l.steps;
  }
  CHECK(drained_steps == uint64_t{kThreads} * kSteps);
  CHECK(drained_bytes == uint64_t{kThreads} * kSteps * 64);
}
