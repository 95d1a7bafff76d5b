// What NCCL's NET transport does when the process at the other end of a connection between
// nodes is gone (net_peer_watch.h): ncclCommGetAsyncError turns ncclRemoteError on the ranks
// whose proxy talks to it, as NCCL's does; the collective itself goes on waiting.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/simgpu/nccl/net_peer_watch.h"
#include "multi_rank.h"

namespace {

constexpr int kRanks = 3;
constexpr int kGone = 2;  // ring: 1 sends to it, 0 receives from it
constexpr int kRemote = 0, kNoError = 1, kOtherError = 2, kSetupFailed = 3;

// Rank kGone exits once joined; the others run an AllReduce it never joins (far more steps than
// NCCL_STEPS), after it is gone, and say what ncclCommGetAsyncError answers within `within`.
testing::RankResults runWithoutOne(const std::map<std::string, std::string>& env, std::chrono::milliseconds within) {
  testing::MultiRankJob job(kRanks);
  ncclUniqueId id = job.id();
  testing::RankBoard& board = job.board();
  job.start(
      [&](int rank) {
        ncclComm_t comm = nullptr;
        if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) return kSetupFailed;
        board.progress[rank].store(1);
        if (rank == kGone) _exit(0);
        while (board.progress[kGone].load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // gone, and seen gone
        std::vector<float> buf(1 << 22, 1.0f);
        if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess)
          return kSetupFailed;
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
  return job.wait(std::chrono::seconds(30));
}

}  // namespace

TEST_CASE("OverSocketsBothNetworkNeighboursOfAGoneProcessGetNcclRemoteError") {
  auto res = runWithoutOne({{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_NET", "Socket"}, {"NCCL_ALGO", "Ring"}},
                           std::chrono::seconds(3));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kRemote, kRemote, 0});
}

TEST_CASE("OverIbOnlyAReceivePostedAfterThePeerWentFailsOnceTheRetriesRanOut") {
  // NCCL_IB_TIMEOUT=10: (7 + 1) x 4.096 us x 2^10 = 34 ms. Rank 0 posts its receives from the
  // gone rank after it went (their clear-to-send goes to it: failed); rank 1 waits for a
  // clear-to-send from it that never comes, and posts nothing to it.
  auto res = runWithoutOne(
      {{"SIMGPU_RANKS_PER_NODE", "1"}, {"NCCL_NET", "IB"}, {"NCCL_ALGO", "Ring"}, {"NCCL_IB_TIMEOUT", "10"}},
      std::chrono::seconds(2));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kRemote, kNoError, 0});
}

TEST_CASE("OnOneNodeNothingFailsWhenAPeerIsGone") {
  // Shared memory and P2P inside a node have no connection to close: NCCL's kernel just waits.
  auto res = runWithoutOne({{"SIMGPU_RANKS_PER_NODE", "4"}, {"NCCL_NET", "Socket"}, {"NCCL_ALGO", "Ring"}},
                           std::chrono::seconds(1));
  REQUIRE_FALSE(res.timed_out);
  CHECK(res.exit_codes == std::vector<int>{kNoError, kNoError, 0});
}

TEST_CASE("IbRetryTimeFollowsNcclsTimeoutAndRetryCount") {
  // Defaults 20 and 7: 8 x 4.096 us x 2^20 = 34.4 s.
  unsetenv("NCCL_IB_TIMEOUT");
  unsetenv("NCCL_IB_RETRY_CNT");
  const double s = std::chrono::duration<double>(simnccl::NetPeerWatch::ibRetryTime()).count();
  CHECK(s == Approx(34.36).epsilon(0.01));
}
