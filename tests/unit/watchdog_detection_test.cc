// Hang detection with fake time, the trigger race, and the snapshot's content.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "hangwatch/watchdog/hang_detector.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/watchdog/host_call_slots.h"
#include "hangwatch/watchdog/snapshot_builder.h"
#include "hangwatch/watchdog/trigger_watcher.h"
#include "test_env.h"

using namespace hangwatch;
using namespace hangwatch::watchdog;

using test_support::kSecond;

namespace {


PendingOp allReduce(uint64_t stream, int64_t issue_ns, uint64_t seq, uint64_t comm_hash) {
  PendingOp op;
  op.op.cls = OpClass::kCollective;
  op.op.name = "ncclAllReduce";
  op.op.stream = stream;
  op.op.host_issue_ns = issue_ns;
  op.op.seq = seq;
  op.op.comm_hash = comm_hash;
  op.op.bytes = 4096;
  op.dtype = 7;  // ncclFloat32
  op.count = 1024;
  return op;
}

std::string freshDir() {
  char tmpl[] = "/tmp/hangwatch-unit-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("AnOpPendingLongerThanTheTimeoutIsAHang") {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  HangDetector detector(3 * kSecond);
  queues.push(allReduce(0x10, 1 * kSecond, 10, 0xabc));
  CHECK_FALSE(detector.check(queues, slots, comms, 3 * kSecond));
  auto finding = detector.check(queues, slots, comms, 4 * kSecond + 1);
  REQUIRE(finding);
  CHECK(finding->reason == "timeout");
  CHECK(finding->stuck.op == "ncclAllReduce");
  CHECK(finding->stuck.seq == std::optional<uint64_t>(10));
  CHECK(finding->stuck.comm == CommTable::hashHex(0xabc));
  CHECK(finding->stuck.stream == "0x10");
}

TEST_CASE("ALongOpThatFinishesBeforeTheTimeoutDoesNotMakeItsSuccessorLookHung") {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  HangDetector detector(2 * kSecond);
  // A 1.5 s GEMM followed by a collective issued right behind it.
  PendingOp gemm = allReduce(0x10, 0, 0, 0);
  gemm.op.cls = OpClass::kGemm;
  queues.push(gemm);
  queues.push(allReduce(0x10, 1000, 3, 0xabc));
  CHECK_FALSE(detector.check(queues, slots, comms, 1500'000'000));
  queues.popFront(0x10, 1500'000'000);
  // 2.5 s after the collective was issued, but only 1 s after it got its turn.
  CHECK_FALSE(detector.check(queues, slots, comms, 2500'000'000));
  CHECK(detector.check(queues, slots, comms, 3600'000'000));
}

TEST_CASE("AThreadStuckInAnNcclHostCallPastTheTimeoutIsAHang") {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  comms.add(0x77, 0xfeed, 1, 4, 0);
  HangDetector detector(1 * kSecond);
  std::optional<HangFinding> finding;
  {
    HostCallScope inside(&slots, "ncclAllReduce", 0x77, 5 + 1, kSecond);
    CHECK_FALSE(detector.check(queues, slots, comms, kSecond + kSecond / 2));
    finding = detector.check(queues, slots, comms, 2 * kSecond + 1);
  }
  REQUIRE(finding);
  CHECK(finding->reason == "host-call-timeout");
  CHECK(finding->stuck.op == "ncclAllReduce (host)");
  CHECK(finding->stuck.seq == std::optional<uint64_t>(5));
  CHECK(finding->stuck.comm == CommTable::hashHex(0xfeed));
  // Once the call returned, nothing is stuck.
  CHECK_FALSE(detector.check(queues, slots, comms, 3 * kSecond));
}

TEST_CASE("TheSnapshotListsTheUniqueIdsThisProcessMadeTheLastOnesKept") {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  SnapshotInputs in;
  in.queues = &queues;
  in.comms = &comms;
  in.host_calls = &slots;
  CHECK(buildSnapshot(in).unique_ids_made.empty());
  slots.noteIdMade(0xcafe);
  CHECK(buildSnapshot(in).unique_ids_made == std::vector<std::string>{CommTable::hashHex(0xcafe)});
  for (uint64_t h = 1; h <= HostCallSlots::kIdsKept + 4; ++h) slots.noteIdMade(h);
  const auto made = buildSnapshot(in).unique_ids_made;
  REQUIRE(made.size() == HostCallSlots::kIdsKept);
  CHECK(std::count(made.begin(), made.end(), CommTable::hashHex(HostCallSlots::kIdsKept + 4)) == 1);
  CHECK(std::count(made.begin(), made.end(), CommTable::hashHex(0xcafe)) == 0);
}

TEST_CASE("AnEarlyWarningNeedsAStalledOperationWhoseCommunicatorStoppedMoving") {
  StreamQueues queues;
  int64_t last_movement = 0;
  StallDetector detector(5 * kSecond, [&](uintptr_t) { return last_movement; });
  PendingOp op = allReduce(0x10, 1 * kSecond, 10, 0xabc);
  op.comm = 0x77;
  queues.push(op);
  CHECK_FALSE(detector.check(queues, 5 * kSecond));
  // NCCL's proxy steps or kernel channels moved 1 s ago: a slow collective, not a stalled one.
  last_movement = 5 * kSecond;
  CHECK_FALSE(detector.check(queues, 6 * kSecond + 1));
  auto finding = detector.check(queues, 10 * kSecond + 1);
  REQUIRE(finding);
  CHECK(finding->reason == "no-progress");
  CHECK(finding->stuck.op == "ncclAllReduce");
  CHECK(finding->stuck.seq == std::optional<uint64_t>(10));
}

TEST_CASE("AnEarlyWarningIgnoresCopiesKernelsAndHostCalls") {
  StreamQueues queues;
  StallDetector detector(1 * kSecond, [](uintptr_t) -> int64_t { return 0; });
  PendingOp copy = allReduce(0x10, 0, 0, 0);
  copy.op.cls = OpClass::kMemcpy;
  PendingOp kernel = allReduce(0x20, 0, 0, 0);
  kernel.op.cls = OpClass::kKernel;
  queues.push(copy);
  queues.push(kernel);
  CHECK_FALSE(detector.check(queues, 10 * kSecond));
  PendingOp gemm = allReduce(0x30, 0, 0, 0);
  gemm.op.cls = OpClass::kGemm;
  gemm.op.name = "cublasGemmEx";
  queues.push(gemm);
  auto finding = detector.check(queues, 10 * kSecond);
  REQUIRE(finding);
  CHECK(finding->stuck.op == "cublasGemmEx");
}

TEST_CASE("TwoDetectorsRacingForTheTriggerProduceExactlyOneWinner") {
  std::string dir = freshDir();
  for (int round = 0; round < 20; ++round) {
    std::string job = dir + "/job" + std::to_string(round);
    std::atomic<int> winners{0}, errors{0};
    std::vector<std::thread> detectors;
    for (int rank = 0; rank < 4; ++rank)
      detectors.emplace_back([&, rank] {
        TriggerWatcher watcher(job, 0);
        TriggerRecord record;
        record.rank = rank;
        record.reason = "timeout";
        auto won = watcher.fire(record);
        if (!won.ok())
          errors.fetch_add(1);
        else if (*won)
          winners.fetch_add(1);
      });
    for (auto& t : detectors) t.join();
    CHECK(errors.load() == 0);
    CHECK(winners.load() == 1);
    TriggerWatcher reader(job, 0);
    auto record = reader.read();
    REQUIRE(record);
    CHECK(record->reason == "timeout");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("ARankWithNothingInFlightSeesTheTriggerWithinOneCheckInterval") {
  std::string job = freshDir();
  TriggerWatcher watcher(job, 250'000'000);
  CHECK_FALSE(watcher.triggered(0));
  TriggerWatcher other(job, 0);
  TriggerRecord record;
  record.rank = 3;
  REQUIRE(other.fire(record).ok());
  CHECK_FALSE(watcher.triggered(100'000'000));  // throttled: no stat yet
  CHECK(watcher.triggered(250'000'000));
  std::filesystem::remove_all(job);
}

TEST_CASE("SnapshotNamesThePendingCollectiveAndEachCommunicatorsSequenceNumbers") {
  StreamQueues queues;
  HostCallSlots slots;
  CommTable comms;
  CommEntry* world = comms.add(0x1, 0xabc, 2, 4, 1);
  world->issued = 11;          // seq 0..10 issued
  world->completed_plus1 = 10; // seq 0..9 completed
  PendingOp pending = allReduce(0x10, 1 * kSecond, 10, 0xabc);
  pending.gpu_started = true;
  queues.push(pending);
  SnapshotInputs in;
  in.queues = &queues;
  in.comms = &comms;
  in.host_calls = &slots;
  in.launcher.rank = 2;
  in.launcher.world_size = 4;
  in.launcher.source = "OMPI_COMM_WORLD_RANK";
  in.job_id = "job-1";
  in.device = 1;
  in.timeout_s = 3;
  in.now_ns = 5 * kSecond;
  WatchdogSnapshot s = buildSnapshot(in);
  CHECK(s.identity.rank == std::optional<int>(2));
  CHECK(s.identity.pid == getpid());
  CHECK(s.identity.device == std::optional<int>(1));
  REQUIRE(s.comms.size() == 1);
  CHECK(s.comms[0].hash == CommTable::hashHex(0xabc));
  CHECK(s.comms[0].last_issued_seq == std::optional<uint64_t>(10));
  CHECK(s.comms[0].last_completed_seq == std::optional<uint64_t>(9));
  REQUIRE(s.streams.size() == 1);
  REQUIRE(s.streams[0].pending.size() == 1);
  const SnapshotPendingOp& p = s.streams[0].pending[0];
  CHECK(p.op == "ncclAllReduce");
  CHECK(p.op_class == "collective");
  CHECK(p.seq == std::optional<uint64_t>(10));
  CHECK(p.dtype == "float32");
  CHECK(p.count == 1024);
  CHECK(p.age_s == Approx(4.0));
  CHECK(p.gpu_started);
  // Without a launcher rank the first communicator's rank names the file.
  in.launcher = {};
  CHECK(buildSnapshot(in).identity.rank == std::optional<int>(2));
  CHECK(buildSnapshot(in).identity.rank_source == "communicator");
}
