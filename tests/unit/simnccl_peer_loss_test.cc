// What NCCL's NET transport does when the process at the other end of a connection between
// nodes is gone (net_peer_watch.h): ncclCommGetAsyncError turns ncclRemoteError on the ranks
// whose proxy talks to it, as NCCL's does; the collective itself goes on waiting.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/simgpu/nccl/comm_handle.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/net_peer_watch.h"
#include "multi_rank.h"
#include "test_env.h"

namespace {

constexpr int kPeerLossRanks = 3;
constexpr int kGone = 2;  // ring: 1 sends to it, 0 receives from it
constexpr int kRemote = 0, kNoError = 1, kOtherError = 2, kSetupFailed = 3;

// Waits until `pid` is no more (its parent, the test, reaps it at once): a process under a
// sanitizer may take seconds to finish exiting.
void awaitGone(pid_t pid) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // and seen gone (looked at every 50 ms)
}

// Rank kGone exits once joined (`gone_first` false: after the others' AllReduce has stood
// waiting for it, its GPU stopped by a dead-rank fault); the others run an AllReduce (far more
// steps than NCCL_STEPS) and say what ncclCommGetAsyncError answers within `within` of it
// being gone.
testing::RankResults runWithoutOne(std::map<std::string, std::string> env, std::chrono::milliseconds within,
                                   bool gone_first = true) {
  testing::MultiRankJob job(kPeerLossRanks);
  ncclUniqueId id = job.id();
  testing::RankBoard& board = job.board();
  if (!gone_first) env["SIMGPU_FAULTS"] = "dead-rank=" + std::to_string(kGone) + "@op=0";
  constexpr int kPidSlot = 32;  // board.progress[kPidSlot]: the gone rank's pid
  job.start(
      [&](int rank) {
        ncclComm_t comm = nullptr;
        if (ncclCommInitRank(&comm, kPeerLossRanks, id, rank) != ncclSuccess) return kSetupFailed;
        std::vector<float> buf(1 << 22, 1.0f);
        if (rank == kGone) board.progress[kPidSlot].store(static_cast<int>(getpid()));
        board.progress[rank].store(1);
        if (rank == kGone && gone_first) _exit(0);
        while (board.progress[kGone].load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const pid_t gone = static_cast<pid_t>(board.progress[kPidSlot].load());
        if (gone_first) awaitGone(gone);
        if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return kSetupFailed;
        board.progress[rank].store(2);
        if (rank == kGone) {  // once the others stand waiting for it
          for (int r = 0; r < kPeerLossRanks; ++r)
            while (board.progress[r].load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          _exit(0);
        }
        if (!gone_first) awaitGone(gone);
        const auto end = std::chrono::steady_clock::now() + within;
        ncclResult_t state = ncclSuccess;
        while (std::chrono::steady_clock::now() < end) {
          if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return kSetupFailed;
          if (state != ncclSuccess) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        _exit(state == ncclRemoteError ? kRemote : state == ncclSuccess ? kNoError : kOtherError);
      },
      env);
  return job.wait(std::chrono::seconds(60));
}

// This process's peer-watch threads (one per communicator between nodes).
int watchThreads() { return test_support::threadsNamed("simnccl-netpeer"); }

}  // namespace

TEST_CASE("OverSocketsBothNetworkNeighboursOfAGoneProcessGetNcclRemoteError") {
  auto res = runWithoutOne({{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_NET", "Socket"}, {"NCCL_ALGO", "Ring"}},
                           std::chrono::seconds(3));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kRemote, kRemote, 0});
}

TEST_CASE("OverIbWhatIsPostedToAGonePeerFailsOnceTheRetriesRanOut") {
  // NCCL_IB_TIMEOUT=10: (7 + 1) x 4.096 us x 2^10 = 34 ms. The AllReduce starts after the peer
  // went: rank 0's receives from it write their clear-to-send to it, rank 1 writes its first
  // steps into its buffer. Both fail.
  auto res = runWithoutOne(
      {{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_NET", "IB"}, {"NCCL_ALGO", "Ring"}, {"NCCL_IB_TIMEOUT", "10"}},
      std::chrono::seconds(2));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kRemote, kRemote, 0});
}

TEST_CASE("OverIbAPeerThatGoesWhileTheOthersAlreadyWaitIsNeverNoticed") {
  // Its GPU stopped first; when it exits, rank 0's receives were posted long before and rank 1
  // waits for a clear-to-send: nothing is posted to it, and RC queue pairs have no keepalive.
  // Over sockets the same job fails at once (the receive reads end-of-file).
  const std::map<std::string, std::string> env = {
      {"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_ALGO", "Ring"}, {"NCCL_IB_TIMEOUT", "10"}};
  auto ib = env;
  ib["NCCL_NET"] = "IB";
  auto res = runWithoutOne(ib, std::chrono::milliseconds(1500), false);
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kNoError, kNoError, 0});
  auto sockets = env;
  sockets["NCCL_NET"] = "Socket";
  res = runWithoutOne(sockets, std::chrono::milliseconds(1500), false);
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes[0] == kRemote);
}

TEST_CASE("OnOneNodeNothingFailsWhenAPeerIsGone") {
  // Shared memory and P2P inside a node have no connection to close: NCCL's kernel just waits.
  auto res = runWithoutOne({{"SIMGPU_RANKS_PER_NODE", "4"}, {"NCCL_NET", "Socket"}, {"NCCL_ALGO", "Ring"}},
                           std::chrono::seconds(1));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kNoError, kNoError, 0});
}

// NCCL's ncclCommAbort returns with the communicator's threads joined (src/init.cc
// commReclaim -> ncclProxyStop). simnccl's peer watch too, even while something else still
// holds a reference to the communicator (as an in-flight collective's stream work does until
// it unwinds): a process that exits right after the abort leaves no thread of it behind.
TEST_CASE("AbortReturnsWithThePeerWatchGoneWhileTheCommunicatorIsStillReferenced") {
  testing::MultiRankJob job(kPeerLossRanks);
  ncclUniqueId id = job.id();
  job.start(
      [&](int rank) {
        ncclComm_t comm = nullptr;
        if (ncclCommInitRank(&comm, kPeerLossRanks, id, rank) != ncclSuccess) return 10;
        if (watchThreads() != 1) return 11;  // named at its start (a name over 15 characters is refused)
        std::shared_ptr<simnccl::Communicator> still_held = comm->state;
        ncclCommAbort(comm);
        const int left = watchThreads();
        still_held.reset();
        return left == 0 ? 0 : 20 + left;
      },
      {{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_ALGO", "Ring"}});
  auto res = job.wait(std::chrono::seconds(60));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("IbRetryTimeFollowsNcclsTimeoutAndRetryCount") {
  // Defaults 20 and 7: 8 x 4.096 us x 2^20 = 34.4 s.
  unsetenv("NCCL_IB_TIMEOUT");
  unsetenv("NCCL_IB_RETRY_CNT");
  const double s = std::chrono::duration<double>(simnccl::NetPeerWatch::ibRetryTime()).count();
  CHECK(s == Approx(34.36).epsilon(0.01));
}
