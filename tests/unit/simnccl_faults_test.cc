// SIMGPU_FAULTS as DESIGN.md specifies them, observed from outside the ranks:
// which collective each rank blocks in, that abort releases it, and timings.
#include <cuda_runtime_api.h>
#include <unistd.h>
#include <nccl.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/simgpu/nccl/ring_channel.h"
#include "multi_rank.h"

namespace {

// Aborts `comm` once the test asks on the board; the blocked call must then return.
class AbortWhenAsked {
 public:
  AbortWhenAsked(ncclComm_t comm, testing::RankBoard& board)
      : thread_([comm, &board] {
          while (!board.abort_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          ncclCommAbort(comm);
        }) {}
  ~AbortWhenAsked() { thread_.join(); }
  AbortWhenAsked(const AbortWhenAsked&) = delete;
  AbortWhenAsked& operator=(const AbortWhenAsked&) = delete;

 private:
  std::thread thread_;
};

// Each rank runs `ops` AllReduces, reporting completed ones on the board, and
// aborts its communicator when the test asks (the blocked call must then return).
int allReduceLoop(int rank, int nranks, const ncclUniqueId& id, int ops, testing::RankBoard& board,
                  int mismatch_rank = -1, int mismatch_op = -1) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  AbortWhenAsked aborter(comm, board);
  std::vector<float> buf(200000, 1.0f), gathered(200000 * nranks);
  for (int op = 0; op < ops; ++op) {
    if (rank == mismatch_rank && op == mismatch_op)
      ncclAllGather(buf.data(), gathered.data(), buf.size(), ncclFloat32, comm, stream);
    else
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclMax, comm, stream);
    cudaStreamSynchronize(stream);
    if (board.abort_requested.load()) break;
    board.progress[rank].store(op + 1);
  }
  return 0;
}

std::vector<int> hangAndRelease(int nranks, const std::string& faults, int ops, int mismatch_rank = -1,
                                int mismatch_op = -1) {
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start([&](int rank) { return allReduceLoop(rank, nranks, id, ops, board, mismatch_rank, mismatch_op); },
            {{"SIMGPU_FAULTS", faults}});
  std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  board.abort_requested.store(1);
  auto res = job.wait(std::chrono::seconds(20));
  INFO("abort must release every blocked rank");
  CHECK(testing::allZero(res));
  return stalled;
}

double timedSendMs(const std::string& faults) {
  testing::MultiRankJob job(2);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start(
      [&](int rank) {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 100;
        const size_t n = 2 << 20;  // 8 MiB: at 0.05 GB/s the link model, not memcpy, sets the time
        std::vector<float> buf(n, 1.0f);
        auto t0 = std::chrono::steady_clock::now();
        if (rank == 0)
          ncclSend(buf.data(), n, ncclFloat32, 1, comm, nullptr);
        else
          ncclRecv(buf.data(), n, ncclFloat32, 0, comm, nullptr);
        cudaDeviceSynchronize();
        auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (rank == 1) board.progress[0].store(static_cast<int>(ms));
        ncclCommDestroy(comm);
        return 0;
      },
      {{"SIMGPU_FAULTS", faults}, {"SIMGPU_LINK_GBPS", "0.05"}});
  REQUIRE(testing::allZero(job.wait()));
  return board.progress[0].load();
}

}  // namespace

TEST_CASE("DeadLinkBlocksEveryRankInItsKthCollective") {
  // op=3 is the 4th collective: three complete everywhere, the 4th never does.
  CHECK(hangAndRelease(4, "dead-link=1->2@op=3", 8) == std::vector<int>{3, 3, 3, 3});
}

TEST_CASE("DeadLinkOnAPointToPointConnectionStopsItsKthLaunch") {
  // Two ranks exchange in a group per step, one launch each. op=3 counts the transfers' own
  // launches (a communicator that runs no collective has no collective sequence to count), so
  // three exchanges complete and rank 1 never gets rank 0's 4th send. Rank 0's sends of that
  // exchange fit in the connection's buffers, so it finishes it (as on NCCL, a sender runs
  // ahead until it runs out of credits) and waits in the 5th for rank 1's send.
  const int steps = 6;
  testing::MultiRankJob job(2);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start(
      [&](int rank) {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return 100;
        AbortWhenAsked aborter(comm, board);
        std::vector<float> out(4096, 1.0f), in(4096);
        for (int step = 0; step < steps && !board.abort_requested.load(); ++step) {
          ncclGroupStart();
          ncclSend(out.data(), out.size(), ncclFloat32, 1 - rank, comm, nullptr);
          ncclRecv(in.data(), in.size(), ncclFloat32, 1 - rank, comm, nullptr);
          ncclGroupEnd();
          cudaDeviceSynchronize();
          if (!board.abort_requested.load()) board.progress[rank].store(step + 1);
        }
        return 0;
      },
      {{"SIMGPU_FAULTS", "dead-link=0->1@op=3"}});
  const std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
  CHECK(stalled == std::vector<int>{4, 3});
}

TEST_CASE("DeadLinkOnOneChannelStillBlocksTheCollective") {
  CHECK(hangAndRelease(4, "dead-link=2->3@op=2,channel=1", 6) == std::vector<int>{2, 2, 2, 2});
}

std::string thisHost() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST_CASE("DeadNicStopsEveryConnectionBetweenNodesItCarries") {
  // Nodes {0,1} and {2,3}; every rank's GPU is device 0, whose NIC is mlx5_0: the ring's links
  // between nodes (1->2, 3->0) stop at op 3, on whichever end's NIC.
  testing::MultiRankJob job(4);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start([&](int rank) { return allReduceLoop(rank, 4, id, 8, board); },
            {{"SIMGPU_FAULTS", "dead-nic=" + thisHost() + ":mlx5_0@op=3"}, {"SIMGPU_RANKS_PER_NODE", "2"},
             {"NCCL_ALGO", "Ring"}});
  std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  CHECK(stalled == std::vector<int>{3, 3, 3, 3});
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
}

TEST_CASE("DeadNicChangesNothingOnConnectionsInsideANode") {
  testing::MultiRankJob job(4);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start([&](int rank) { return allReduceLoop(rank, 4, id, 5, board); },
            {{"SIMGPU_FAULTS", "dead-nic=" + thisHost() + ":mlx5_0@op=0"}, {"NCCL_ALGO", "Ring"}});
  CHECK(job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60)) == std::vector<int>{5, 5, 5, 5});
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("DeadLinkBetweenRanksThatAreNotRingNeighboursChangesNothing") {
  // The ring is 0->1->2->3->0: a link 0->2 carries no ring traffic.
  testing::MultiRankJob job(4);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  board.abort_requested.store(0);
  job.start([&](int rank) { return allReduceLoop(rank, 4, id, 5, board); }, {{"SIMGPU_FAULTS", "dead-link=0->2@op=0"}});
  std::vector<int> progress = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  CHECK(progress == std::vector<int>{5, 5, 5, 5});
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("DeadRanksHostReturnsFromTheCollectiveAndWaitsWhenItSynchronizes") {
  // Rank 2's GPU stops in its 3rd ncclAllReduce. Its host returns from the call, as with NCCL
  // (src/enqueue.cc: the call returns once the work is queued), and waits in the synchronize
  // like everyone else, whose 3rd collective waits on rank 2's.
  testing::MultiRankJob job(4);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start(
      [&](int rank) {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, 4, id, rank) != ncclSuccess) return 100;
        AbortWhenAsked aborter(comm, board);
        std::vector<float> buf(10000, 1.0f);
        for (int op = 0; op < 5 && !board.abort_requested.load(); ++op) {
          board.progress[rank].store(op * 10 + 1);  // entered the call
          ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
          if (board.abort_requested.load()) break;
          board.progress[rank].store(op * 10 + 2);  // the call returned
          if (r != ncclSuccess) return 2;
          cudaDeviceSynchronize();
          if (board.abort_requested.load()) break;
          board.progress[rank].store(op * 10 + 3);  // the collective completed
        }
        return 0;
      },
      {{"SIMGPU_FAULTS", "dead-rank=2@op=2"}});
  std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  CHECK(stalled == std::vector<int>{22, 22, 22, 22});
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
}

TEST_CASE("DeadRanksHostRunsOnUntilItsGpusQueueIsFullThenWaitsInTheCall") {
  // The same, with hosts that never synchronize (as a benchmark loop): rank 2's host returns
  // from call after call until its GPU's queue is full (SIMGPU_LAUNCH_QUEUE_DEPTH), then waits
  // inside the next call's launch, as a host waits in cudaLaunchKernel under ncclAllReduce on
  // a GPU that stopped. The other GPUs wait in the same collective, so their hosts end alike.
  testing::MultiRankJob job(4);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  constexpr int kOps = 400;
  job.start(
      [&](int rank) {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, 4, id, rank) != ncclSuccess) return 100;
        std::vector<float> buf(1000, 1.0f);
        for (int op = 0; op < kOps; ++op) {
          board.progress[rank].store(op * 10 + 1);  // entered the call
          if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
            return 2;
          board.progress[rank].store(op * 10 + 2);  // the call returned
        }
        cudaDeviceSynchronize();
        return 0;
      },
      {{"SIMGPU_FAULTS", "dead-rank=2@op=2"}, {"SIMGPU_LAUNCH_QUEUE_DEPTH", "16"}});
  std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  REQUIRE(stalled.size() == 4u);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << " progress " << stalled[static_cast<size_t>(r)]);
    CHECK(stalled[static_cast<size_t>(r)] % 10 == 1);            // inside a call
    CHECK(stalled[static_cast<size_t>(r)] / 10 > 2);              // it ran on past the stopped collective
    CHECK(stalled[static_cast<size_t>(r)] / 10 < kOps - 1);       // and stopped when the queue was full
  }
  // A GPU that stopped never takes the queued work: the processes are killed, not released.
  (void)job.wait(std::chrono::seconds(1));
}

TEST_CASE("CollectiveMismatchHangsAtThatSequenceNumber") {
  // Rank 1 issues an AllGather where the others issue their 3rd AllReduce.
  CHECK(hangAndRelease(3, "", 6, 1, 2) == std::vector<int>{2, 2, 2});
}

TEST_CASE("MalformedFaultsFailCommunicatorInitNamingTheToken") {
  for (const char* spec : {"dead-link=1-2@op=3", "slow-rank=1:1.5", "dead-rank=1", "explode=3"}) {
    testing::MultiRankJob job(1);
    ncclUniqueId id = job.id();
    std::string token = spec;
    job.start(
        [&](int) {
          ncclComm_t comm;
          if (ncclCommInitRank(&comm, 1, id, 0) != ncclInvalidArgument) return 1;
          return std::string(ncclGetLastError(nullptr)).find(token) != std::string::npos ? 0 : 2;
        },
        {{"SIMGPU_FAULTS", spec}});
    INFO(spec);
    CHECK(testing::allZero(job.wait()));
  }
}

TEST_CASE("FaultNamingARankOutsideTheJobFailsInit") {
  testing::MultiRankJob job(2);
  ncclUniqueId id = job.id();
  job.start(
      [&](int rank) {
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, 2, id, rank) != ncclInvalidArgument) return 1;
        return std::string(ncclGetLastError(nullptr)).find("dead-rank=5@op=1") != std::string::npos ? 0 : 2;
      },
      {{"SIMGPU_FAULTS", "dead-rank=5@op=1"}});
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("SlowLinkStretchesTransferTimeByTheFraction") {
  // The best of two runs each: a loaded machine only ever adds time (CI once overslept 140 ms).
  auto best = [](const std::string& faults) { return std::min(timedSendMs(faults), timedSendMs(faults)); };
  double healthy = best("");
  double slow = best("slow-link=0->1:0.25");
  double other_direction = best("slow-link=1->0:0.25");
  INFO("healthy " << healthy << " ms, slow " << slow << " ms, other direction " << other_direction << " ms");
  // 8 MiB at 0.05 GB/s is 168 ms; at a quarter of that, 671 ms. The differences cancel
  // the fixed costs (init, copies, an instrumented memcpy) that a ratio would not; the
  // bounds leave room for oversleeping on a loaded machine, not for a missing or misplaced slowdown.
  constexpr double kModelExtraMs = 3 * 8.0 * 1048576 / 0.05e9 * 1e3;
  CHECK(slow - healthy > 0.6 * kModelExtraMs);
  CHECK(slow - healthy < 1.6 * kModelExtraMs);
  CHECK(std::abs(other_direction - healthy) < 0.5 * kModelExtraMs);
}

TEST_CASE("EveryStepIsOnTheWireForItsLinksTimeEvenWhenTheSenderIsSlowerThanTheLink") {
  // On a loaded machine the emulated GPU copies slower than the link moves data. Each
  // step must still take the link's time, or NCCL's profiler would see a link at a
  // quarter of its bandwidth as fast as the others (issue #25: 0.77 of the median, not 0.25).
  simnccl::LinkPacer pacer;
  constexpr size_t kStep = 64 * 1024;
  constexpr double kGbps = 0.5;  // 131 us per step
  const auto cost = std::chrono::nanoseconds(static_cast<int64_t>(kStep / kGbps));
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the sender's copy, slower than the link
    auto start = std::chrono::steady_clock::now();
    pacer.pace(kStep, kGbps);
    CHECK(std::chrono::steady_clock::now() - start >= cost);
  }
}
