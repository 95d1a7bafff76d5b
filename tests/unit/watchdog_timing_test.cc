// Event pool, issue queue, per-stream queues and the poller's completion pass,
// driven by fake events.
#include <catch2/catch.hpp>

#include <set>
#include <thread>
#include <vector>

#include "hangwatch/watchdog/bounded_queue.h"
#include "hangwatch/watchdog/device_timers.h"
#include "hangwatch/watchdog/event_pool.h"
#include "hangwatch/watchdog/op_poller.h"
#include "hangwatch/watchdog/stream_identity.h"
#include "hangwatch/watchdog/stream_queues.h"
#include "hangwatch/watchdog/testing/fake_event_api.h"

using namespace hangwatch::watchdog;
using hangwatch::watchdog::testing::FakeEventApi;

namespace {

cudaStream_t streamOf(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

PendingOp issuedOn(DeviceTimer& timer, EventApi& api, uintptr_t stream, int64_t issue_ns, const char* name = "op") {
  PendingOp op;
  REQUIRE(timer.pool().acquire(&op.start_event));
  REQUIRE(timer.pool().acquire(&op.end_event));
  op.device = timer.device();
  api.record(op.start_event, streamOf(stream));
  api.record(op.end_event, streamOf(stream));
  op.op.name = name;
  op.op.stream = stream;
  op.op.host_issue_ns = issue_ns;
  return op;
}

}  // namespace

TEST_CASE("EventPoolHandsOutEachEventOnceAndCountsExhaustion") {
  FakeEventApi api;
  EventPool pool(api, 4);
  REQUIRE(pool.fill().ok());
  std::set<cudaEvent_t> seen;
  cudaEvent_t e;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(pool.acquire(&e));
    REQUIRE(seen.insert(e).second);
  }
  CHECK_FALSE(pool.acquire(&e));
  CHECK(pool.exhausted() == 1);
  pool.release(*seen.begin());
  REQUIRE(pool.acquire(&e));
  CHECK(e == *seen.begin());
}

TEST_CASE("EventPoolKeepsTheEventsCreatedBeforeCreationFailed") {
  FakeEventApi api;
  api.fail_create_after = 3;
  EventPool pool(api, 8);
  auto filled = pool.fill();
  CHECK_FALSE(filled.ok());
  CHECK(pool.created() == 3);
  cudaEvent_t e;
  for (int i = 0; i < 3; ++i) CHECK(pool.acquire(&e));
  CHECK_FALSE(pool.acquire(&e));
}

TEST_CASE("BoundedQueueDropsWhenFullAndNeverLosesOrDuplicatesUnderConcurrency") {
  BoundedQueue<uint64_t> q(1024);
  constexpr int kProducers = 4;
  constexpr uint64_t kPerProducer = 20000;
  std::atomic<uint64_t> pushed{0}, dropped{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        if (q.tryPush(p * kPerProducer + i))
          pushed.fetch_add(1);
        else
          dropped.fetch_add(1);
      }
    });
  std::vector<bool> seen(kProducers * kPerProducer, false);
  uint64_t popped = 0;
  std::atomic<bool> producing{true};
  std::thread done_watch([&] {
    for (auto& t : producers) t.join();
    producing = false;
  });
  uint64_t v;
  for (;;) {
    const bool last_round = !producing.load();
    while (q.tryPop(&v)) {
      REQUIRE_FALSE(seen[v]);
      seen[v] = true;
      ++popped;
    }
    if (last_round) break;
  }
  done_watch.join();
  CHECK(popped == pushed.load());
  CHECK(pushed.load() + dropped.load() == kProducers * kPerProducer);
}

TEST_CASE("OldestOpOfAStreamWaitsOnlySinceItsPredecessorCompleted") {
  StreamQueues queues;
  PendingOp a, b;
  a.op.stream = b.op.stream = 7;
  a.op.host_issue_ns = 100;
  b.op.host_issue_ns = 200;
  queues.push(a);
  queues.push(b);
  CHECK(queues.front(7)->front_since_ns == 100);
  queues.popFront(7, 5000);
  REQUIRE(queues.front(7) != nullptr);
  CHECK(queues.front(7)->op.host_issue_ns == 200);
  CHECK(queues.front(7)->front_since_ns == 5000);
  queues.popFront(7, 6000);
  CHECK(queues.front(7) == nullptr);
  CHECK(queues.streams().empty());
}

TEST_CASE("PollerCompletesOpsInStreamOrderAndGivesTheirEventsBack") {
  FakeEventApi api;
  DeviceTimers timers(api, 8);
  DeviceTimer* timer = timers.create(0);
  REQUIRE(timer != nullptr);
  EventPool& pool = timer->pool();
  CommTable comms;
  std::vector<CompletedOp> done;
  OpPoller poller(api, timers, comms, [&](const CompletedOp& op) { done.push_back(op); });
  PendingOp first = issuedOn(*timer, api, 1, 10, "first");
  PendingOp second = issuedOn(*timer, api, 1, 20, "second");
  poller.accept(first);
  poller.accept(second);
  // The second op's events completing first (impossible on one stream) must not let it jump the queue.
  api.complete(second.start_event, 5);
  api.complete(second.end_event, 6);
  CHECK(poller.poll(1000) == 0);
  api.complete(first.start_event, 1);
  api.complete(first.end_event, 3);
  CHECK(poller.poll(2000) == 2);
  REQUIRE(done.size() == 2);
  CHECK(std::string(done[0].name) == "first");
  CHECK(done[0].gpu_end_ns - done[0].gpu_start_ns == 2000000);
  CHECK(std::string(done[1].name) == "second");
  CHECK(poller.queues().pendingCount() == 0);
  cudaEvent_t e;
  int available = 0;
  while (pool.acquire(&e)) ++available;
  CHECK(available == 8);
}

TEST_CASE("GpuTimesAreMappedOntoHostTimeThroughTheReferenceEvent") {
  FakeEventApi api;
  DeviceTimers timers(api, 8);
  DeviceTimer* timer = timers.create(0);
  REQUIRE(timer != nullptr);
  GpuClock& clock = timer->clock();
  cudaEvent_t ref;
  REQUIRE(timer->pool().acquire(&ref));
  clock.calibrate(ref, streamOf(99), 1'000'000'000);
  CHECK_FALSE(clock.ready());
  api.complete(ref, 100.0);  // GPU clock 100 ms == host 1 s
  clock.poll();
  REQUIRE(clock.ready());
  CommTable comms;
  std::vector<CompletedOp> done;
  OpPoller poller(api, timers, comms, [&](const CompletedOp& op) { done.push_back(op); });
  PendingOp op = issuedOn(*timer, api, 1, 900'000'000);
  poller.accept(op);
  api.complete(op.start_event, 150.0);
  api.complete(op.end_event, 175.0);
  poller.poll(2'000'000'000);
  REQUIRE(done.size() == 1);
  CHECK(done[0].gpu_start_ns == 1'050'000'000);
  CHECK(done[0].gpu_end_ns == 1'075'000'000);
  // Issue latency (GPU start - host issue) is what the metrics get from these.
  CHECK(done[0].gpu_start_ns - done[0].host_issue_ns == 150'000'000);
}

TEST_CASE("CompletedCollectivesAdvanceTheirCommunicatorsLastCompletedSeq") {
  FakeEventApi api;
  DeviceTimers timers(api, 8);
  DeviceTimer* timer = timers.create(0);
  REQUIRE(timer != nullptr);
  CommTable comms;
  CommEntry* entry = comms.add(0x1234, 42, 0, 4, 0);
  REQUIRE(entry != nullptr);
  OpPoller poller(api, timers, comms, nullptr);
  PendingOp op = issuedOn(*timer, api, 1, 10, "ncclAllReduce");
  op.op.cls = OpClass::kCollective;
  op.op.seq = 6;
  op.comm = 0x1234;
  poller.accept(op);
  poller.poll(20);
  CHECK(entry->completed_plus1.load() == 0);
  api.complete(op.start_event, 1);
  api.complete(op.end_event, 2);
  poller.poll(30);
  CHECK(entry->completed_plus1.load() == 7);
}

TEST_CASE("EachDeviceTimesWithItsOwnEventsAndItsEventsGoBackToItsPool") {
  FakeEventApi api;
  DeviceTimers timers(api, 4);
  DeviceTimer* dev0 = timers.forDevice(0);
  REQUIRE(dev0 != nullptr);
  CHECK(timers.forDevice(0) == dev0);
  DeviceTimer* dev1 = timers.forDevice(1);
  REQUIRE(dev1 != nullptr);
  CHECK(dev1 != dev0);
  CHECK(timers.forDevice(1) == dev1);
  CHECK(timers.firstDevice() == 0);
  CHECK(timers.forDevice(DeviceTimers::kMaxDevices) == nullptr);
  CHECK(timers.forDevice(-1) == nullptr);

  CommTable comms;
  OpPoller poller(api, timers, comms, nullptr);
  PendingOp on1 = issuedOn(*dev1, api, 1, 10);
  std::set<cudaEvent_t> dev0_events;
  cudaEvent_t e;
  while (dev0->pool().acquire(&e)) dev0_events.insert(e);
  for (cudaEvent_t held : dev0_events) dev0->pool().release(held);
  CHECK(dev0_events.count(on1.start_event) == 0);
  poller.accept(on1);
  api.complete(on1.start_event, 1);
  api.complete(on1.end_event, 2);
  CHECK(poller.poll(100) == 1);
  int back = 0;
  while (dev1->pool().acquire(&e)) ++back;
  CHECK(back == 4);
}

TEST_CASE("ADeviceWhoseEventsCannotBeMadeIsNotRetriedOnEveryLaunch") {
  FakeEventApi api;
  api.fail_create_after = 0;
  DeviceTimers timers(api, 4);
  int failures = 0;
  timers.on_fill_failure = [&](int, const std::string&) { ++failures; };
  CHECK(timers.forDevice(0) == nullptr);
  CHECK(timers.forDevice(0) == nullptr);
  CHECK(failures == 1);
  CHECK(api.created == 0);
}

TEST_CASE("StreamZeroAndThePerThreadStreamAreOneStreamPerDeviceAndThread") {
  const auto user = reinterpret_cast<cudaStream_t>(0x7f0012345670);
  CHECK(streamIdentity(user, 0) == streamIdentity(user, 3));
  CHECK(streamIdentity(nullptr, 0) == 0);
  CHECK(streamIdentity(cudaStreamLegacy, 0) == 0);
  CHECK(streamIdentity(nullptr, 1) != streamIdentity(nullptr, 0));
  CHECK(streamIdentity(cudaStreamLegacy, 1) == streamIdentity(nullptr, 1));
  const uint64_t here = streamIdentity(cudaStreamPerThread, 0);
  CHECK(here != streamIdentity(cudaStreamPerThread, 1));
  CHECK(here != streamIdentity(nullptr, 0));
  uint64_t there = 0;
  std::thread([&] { there = streamIdentity(cudaStreamPerThread, 0); }).join();
  CHECK(there != here);
  CHECK(streamIdentity(cudaStreamPerThread, 0) == here);
}
