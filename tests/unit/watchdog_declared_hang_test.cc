// A hang the framework declares (declared_hang.h): the mailbox between the declaring thread and
// the poller, and which pending operation a declaration names.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "hangwatch/watchdog/declared_hang.h"
#include "hangwatch/watchdog/hang_detector.h"
#include "test_env.h"

using namespace hangwatch::watchdog;
using Clock = std::chrono::steady_clock;

using test_support::kSecond;

namespace {


// The poller's side: waits for the declaration, then answers with `answer`.
template <typename Answer>
std::thread poller(DeclaredHang& d, Answer answer) {
  return std::thread([&d, answer] {
    while (d.pending() == DeclaredHang::How::kNone) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    answer(d);
  });
}

PendingOp collective(uint64_t stream, int64_t front_since_ns, uintptr_t comm) {
  PendingOp op;
  op.op.cls = OpClass::kCollective;
  op.op.name = "ncclAllReduce";
  op.op.stream = stream;
  op.op.host_issue_ns = front_since_ns;
  op.op.seq = 12;
  op.op.comm_hash = 0xabc;
  op.comm = comm;
  return op;
}

}  // namespace

TEST_CASE("ADeclarationIsHeldUntilThisRanksDumpsAreDone") {
  DeclaredHang d;
  std::thread p = poller(d, [](DeclaredHang& h) {
    CHECK(h.pending() == DeclaredHang::How::kAbortSignal);
    CHECK(h.pendingComm() == 0);
    h.dumpingBegan();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    h.dumpsDone();
  });
  const auto t0 = Clock::now();
  CHECK(d.declareAndHold(DeclaredHang::How::kAbortSignal, 0, 30 * kSecond) == DeclaredHang::Outcome::kDumped);
  CHECK(Clock::now() - t0 >= std::chrono::milliseconds(150));
  p.join();
  // Dumps done: a later declaration (another communicator's abort) goes on at once.
  CHECK(d.declareAndHold(DeclaredHang::How::kCommAbort, 0x10, 30 * kSecond) == DeclaredHang::Outcome::kDumped);
}

TEST_CASE("ADeclarationWithNothingPendingGoesOnAsSoonAsThePollerSaysSo") {
  DeclaredHang d;
  std::thread p = poller(d, [](DeclaredHang& h) {
    CHECK(h.pendingComm() == 0x42);
    h.decline();
  });
  const auto t0 = Clock::now();
  CHECK(d.declareAndHold(DeclaredHang::How::kCommAbort, 0x42, 30 * kSecond) == DeclaredHang::Outcome::kNothingPending);
  CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  p.join();
  CHECK(d.pending() == DeclaredHang::How::kNone);
  // And the next declaration is asked again.
  std::thread again = poller(d, [](DeclaredHang& h) { h.decline(); });
  CHECK(d.declareAndHold(DeclaredHang::How::kAbortSignal, 0, 30 * kSecond) == DeclaredHang::Outcome::kNothingPending);
  again.join();
}

TEST_CASE("ADeclarationNobodyAnswersIsHeldNoLongerThanItsBound") {
  DeclaredHang d;
  const auto t0 = Clock::now();
  CHECK(d.declareAndHold(DeclaredHang::How::kAbortSignal, 0, kSecond / 5) == DeclaredHang::Outcome::kHeldTooLong);
  const auto held = Clock::now() - t0;
  CHECK(held >= std::chrono::milliseconds(200));
  CHECK(held < std::chrono::seconds(5));
}

TEST_CASE("ADeclarationDuringThisRanksOwnDumpWaitsForItWithoutAskingAgain") {
  // HANGWATCH_TIMEOUT fired first and the collector is running when the framework aborts.
  DeclaredHang d;
  d.dumpingBegan();
  std::thread responder([&d] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d.dumpsDone();
  });
  CHECK(d.declareAndHold(DeclaredHang::How::kCommAbort, 0x1, 30 * kSecond) == DeclaredHang::Outcome::kDumped);
  CHECK(d.pending() == DeclaredHang::How::kNone);
  responder.join();
}

TEST_CASE("ADeclaredHangNamesTheOldestPendingCommunicationOfTheAbortedCommunicator") {
  StreamQueues queues;
  queues.push(collective(1, 10 * kSecond, 0x100));
  queues.push(collective(2, 5 * kSecond, 0x200));  // older, another communicator
  PendingOp gemm;
  gemm.op.cls = OpClass::kGemm;
  gemm.op.name = "cublasGemmEx";
  gemm.op.stream = 3;
  gemm.op.host_issue_ns = 0;
  queues.push(gemm);
  const int64_t now = 20 * kSecond;

  auto any = declaredHangFinding(queues, now, "framework-signal", kSecond);
  REQUIRE(any);
  CHECK(any->reason == "framework-signal");
  CHECK(any->stuck.op == "ncclAllReduce");
  CHECK(any->stuck.age_s == Approx(15.0));
  auto of_comm = declaredHangFinding(queues, now, "framework-abort", kSecond, 0x100);
  REQUIRE(of_comm);
  CHECK(of_comm->stuck.age_s == Approx(10.0));
  CHECK_FALSE(declaredHangFinding(queues, now, "framework-abort", kSecond, 0x300));
  // Just issued (an abort() right after a launch): no framework's timeout declared that.
  CHECK_FALSE(declaredHangFinding(queues, 10 * kSecond + kSecond / 2, "framework-signal", kSecond, 0x100));
  CHECK_FALSE(declaredHangFinding(StreamQueues{}, now, "framework-signal", kSecond));
}

TEST_CASE("TheHeldAbortIsSaidInOneLineWithHowLongItWasHeld") {
  char buf[160];
  using How = DeclaredHang::How;
  using Outcome = DeclaredHang::Outcome;
  auto line = [&](int rank, How how, Outcome outcome, int64_t ns, size_t cap = sizeof buf) {
    return std::string(buf, DeclaredHang::holdLine(buf, cap, rank, how, outcome, ns));
  };
  CHECK(line(3, How::kAbortSignal, Outcome::kDumped, 2'350'400'000) ==
        "hangwatch[rank 3]: SIGABRT held 2350 ms until this rank's dumps were done\n");
  CHECK(line(0, How::kCommAbort, Outcome::kDumped, 999'999) ==
        "hangwatch[rank 0]: ncclCommAbort held 0 ms until this rank's dumps were done\n");
  CHECK(line(-1, How::kAbortSignal, Outcome::kHeldTooLong, 95'000'000'000) ==
        "hangwatch[rank ?]: SIGABRT held 95000 ms, its bound, and went on with this rank's dumps not done\n");
  // A buffer too small is filled and never overrun.
  CHECK(line(12345, How::kAbortSignal, Outcome::kDumped, 1, 20) == "hangwatch[rank 12345");
}
