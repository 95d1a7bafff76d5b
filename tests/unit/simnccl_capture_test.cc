// NCCL collectives captured into a CUDA graph on simgpu: every launch of the graph runs
// the collective again with correct results, and counts as one op for SIMGPU_FAULTS
// (DESIGN.md §3), so a fault at a replay's op index hangs that replay.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "multi_rank.h"

namespace {

// Rank body: one eager AllReduce (op 0), one captured into a graph, `replays` launches.
// Reports each completed launch on the board; the test aborts the communicator to end.
int captureAndReplay(int rank, int nranks, const ncclUniqueId& id, int replays, testing::RankBoard& board) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::thread aborter([&] {
    while (!board.abort_requested.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ncclCommAbort(comm);
  });
  const size_t n = 50000;
  float* buf = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&buf), n * sizeof(float));
  std::vector<float> host(n, static_cast<float>(rank + 1));
  cudaMemcpy(buf, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, stream);  // warm-up, eager
  cudaStreamSynchronize(stream);
  const float sum = static_cast<float>(nranks * (nranks + 1) / 2);
  int bad = buf[0] == sum ? 0 : 1;
  cudaGraph_t graph = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) return 101;
  if (ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return 102;
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || graph == nullptr) return 103;
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return 104;
  for (int replay = 0; replay < replays && !board.abort_requested.load(); ++replay) {
    cudaMemcpy(buf, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    if (cudaGraphLaunch(exec, stream) != cudaSuccess) return 105;
    cudaStreamSynchronize(stream);
    if (board.abort_requested.load()) break;
    if (buf[n - 1] != sum) bad = 1;
    board.progress[rank].store(replay + 1);
  }
  aborter.join();
  return bad;
}

}  // namespace

TEST_CASE("ACapturedAllReduceRunsAgainAtEveryLaunchWithCorrectSums") {
  const int nranks = 3;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  board.abort_requested.store(0);
  job.start([&](int rank) {
    int rc = captureAndReplay(rank, nranks, id, 4, board);
    return rc;
  });
  // Nothing hangs: let every rank finish its replays, then release the aborters.
  std::vector<int> done = job.waitForStall(std::chrono::milliseconds(1000), std::chrono::seconds(30));
  board.abort_requested.store(1);
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
  CHECK(done == std::vector<int>{4, 4, 4});
}

TEST_CASE("EachReplayOfACapturedCollectiveIsOneOpForFaults") {
  // op 0 is the eager warm-up, the capture itself is no op, replays are ops 1, 2, 3...:
  // a link dead from op 3 lets two replays through and hangs the third.
  const int nranks = 2;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  auto& board = job.board();
  job.start([&](int rank) { return captureAndReplay(rank, nranks, id, 5, board); },
            {{"SIMGPU_FAULTS", "dead-link=0->1@op=3"}});
  std::vector<int> stalled = job.waitForStall(std::chrono::milliseconds(1500), std::chrono::seconds(60));
  board.abort_requested.store(1);
  job.wait(std::chrono::seconds(20));
  CHECK(stalled == std::vector<int>{2, 2});
}
