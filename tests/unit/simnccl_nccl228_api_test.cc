// ncclResetDebugInit is deprecated in nccl.h but still declared there and called by some programs.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
// The parts of NCCL 2.28's host API beyond collectives and p2p: AlltoAll/Gather/Scatter,
// buffer registration and windows, user reduction operators, shrink, revoke, the
// scalable init and config checks, each with NCCL's documented semantics.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "multi_rank.h"

TEST_CASE("AlltoAllGatherAndScatterMoveEachRanksBlocks") {
  const int n = 3;
  const size_t count = 1000;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 100;
    std::vector<float> send(count * n), recv(count * n, -1);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i) send[p * count + i] = static_cast<float>(rank * 10 + p);
    if (ncclAlltoAll(send.data(), recv.data(), count, ncclFloat32, comm, nullptr) != ncclSuccess) return 1;
    cudaDeviceSynchronize();
    for (int p = 0; p < n; ++p)
      if (recv[p * count] != static_cast<float>(p * 10 + rank) || recv[p * count + count - 1] != recv[p * count]) return 2;
    std::vector<float> mine(count, static_cast<float>(rank)), gathered(count * n, -1);
    if (ncclGather(mine.data(), gathered.data(), count, ncclFloat32, 1, comm, nullptr) != ncclSuccess) return 3;
    cudaDeviceSynchronize();
    if (rank == 1)
      for (int p = 0; p < n; ++p)
        if (gathered[p * count + 7] != static_cast<float>(p)) return 4;
    std::vector<float> piece(count, -1);
    if (ncclScatter(send.data(), piece.data(), count, ncclFloat32, 2, comm, nullptr) != ncclSuccess) return 5;
    cudaDeviceSynchronize();
    if (piece[3] != static_cast<float>(2 * 10 + rank)) return 6;
    if (ncclGather(mine.data(), gathered.data(), count, ncclFloat32, n, comm, nullptr) != ncclInvalidArgument) return 7;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("RegisteredBuffersAndWindowsWorkLikeAnyBufferInACollective") {
  const int n = 2;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 100;
    const size_t count = 1 << 14;
    float* buf = nullptr;
    if (ncclMemAlloc(reinterpret_cast<void**>(&buf), count * sizeof(float)) != ncclSuccess) return 1;
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1);
    void* handle = nullptr;
    if (ncclCommRegister(comm, buf, count * sizeof(float), &handle) != ncclSuccess || handle == nullptr) return 2;
    ncclWindow_t win = nullptr;
    if (ncclCommWindowRegister(comm, buf, count * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) return 3;
    if (win == nullptr) return 4;
    if (ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) return 5;
    cudaDeviceSynchronize();
    if (buf[0] != 3.0f || buf[count - 1] != 3.0f) return 6;
    if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return 7;
    if (ncclCommDeregister(comm, handle) != ncclSuccess) return 8;
    if (ncclCommDeregister(comm, handle) != ncclInvalidUsage) return 9;  // "Could not find handle"
    ncclWindow_t untouched = reinterpret_cast<ncclWindow_t>(0x1);
    if (ncclCommWindowRegister(comm, nullptr, 0, &untouched, 0) != ncclSuccess) return 10;
    if (untouched != reinterpret_cast<ncclWindow_t>(0x1)) return 11;  // nothing to register: left alone
    if (ncclCommWindowDeregister(comm, nullptr) != ncclSuccess) return 12;
    ncclMemFree(buf);
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("PreMulSumScalesEachRanksInputBeforeSumming") {
  const int n = 2;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 100;
    const size_t count = 5000;
    std::vector<float> x(count, static_cast<float>(rank + 1));  // 1 and 2
    float immediate = 0.5f;
    ncclRedOp_t half;
    if (ncclRedOpCreatePreMulSum(&half, &immediate, ncclFloat32, ncclScalarHostImmediate, comm) != ncclSuccess) return 1;
    immediate = 100.0f;  // read at creation: later changes do not matter
    if (ncclAllReduce(x.data(), x.data(), count, ncclFloat32, half, comm, nullptr) != ncclSuccess) return 2;
    cudaDeviceSynchronize();
    if (x[0] != 1.5f || x[count - 1] != 1.5f) return 3;
    float* device_scalar = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&device_scalar), sizeof(float));
    *device_scalar = 3.0f;  // read when the collective runs
    ncclRedOp_t triple;
    if (ncclRedOpCreatePreMulSum(&triple, device_scalar, ncclFloat32, ncclScalarDevice, comm) != ncclSuccess) return 4;
    std::vector<float> y(count, static_cast<float>(rank + 1)), out(count / n);
    if (ncclReduceScatter(y.data(), out.data(), count / n, ncclFloat32, triple, comm, nullptr) != ncclSuccess) return 5;
    cudaDeviceSynchronize();
    if (out[0] != 9.0f) return 6;
    if (ncclAllReduce(x.data(), x.data(), count, ncclFloat64, triple, comm, nullptr) != ncclInvalidArgument) return 7;
    if (ncclRedOpDestroy(triple, comm) != ncclSuccess || ncclRedOpDestroy(half, comm) != ncclSuccess) return 8;
    if (ncclAllReduce(x.data(), x.data(), count, ncclFloat32, half, comm, nullptr) != ncclInvalidArgument) return 9;
    if (ncclRedOpDestroy(ncclSum, comm) != ncclInvalidArgument) return 10;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("ShrinkMakesACommunicatorOfTheRemainingRanksWithoutTheExcludedOne") {
  const int n = 4;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 100;
    if (rank == 2) return 0;  // the excluded rank takes no part (it may be dead)
    int excluded[] = {2};
    ncclComm_t shrunk = nullptr;
    if (ncclCommShrink(comm, excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT) != ncclSuccess) return 1;
    int size = 0, me = -1;
    ncclCommCount(shrunk, &size);
    ncclCommUserRank(shrunk, &me);
    if (size != 3 || me != (rank < 2 ? rank : rank - 1)) return 2;
    std::vector<float> v(100, 1.0f);
    if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, shrunk, nullptr) != ncclSuccess) return 3;
    cudaDeviceSynchronize();
    if (v[99] != 3.0f) return 4;
    if (ncclCommShrink(comm, excluded, 1, &shrunk, nullptr, 7) != ncclInvalidArgument) return 5;
    ncclCommDestroy(shrunk);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("ScalableInitRevokeAndConfigChecks") {
  const int n = 2;
  testing::MultiRankJob job(n);
  ncclUniqueId ids[2];
  ids[0] = job.id();
  ncclGetUniqueId(&ids[1]);
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRankScalable(&comm, n, rank, 2, ids, nullptr) != ncclSuccess) return 1;
    std::vector<float> v(10, 1.0f);
    if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) return 2;
    cudaDeviceSynchronize();
    if (v[0] != 2.0f) return 3;
    if (ncclCommRevoke(comm, 5) != ncclInvalidArgument) return 4;
    if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) != ncclSuccess) return 5;
    if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess) return 6;
    if (ncclCommDestroy(comm) != ncclSuccess) return 7;
    ncclConfig_t garbage{};
    ncclComm_t other;
    if (ncclCommInitRankConfig(&other, n, ids[1], rank, &garbage) != ncclInvalidArgument) return 8;
    ncclResetDebugInit();
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

namespace {

// Polls ncclCommGetAsyncError until the communicator's operation is no longer in progress.
ncclResult_t awaitReady(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 20000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return state;
}

}  // namespace

TEST_CASE("NonBlockingCommunicatorsAnswerInProgressAndFinishOnTheirOwnThread") {
  const int n = 2;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    if (ncclCommInitRankConfig(&comm, n, id, rank, &config) != ncclInProgress) return 1;
    int count = 0;
    if (ncclCommCount(comm, &count) != ncclInvalidArgument && awaitReady(comm) == ncclInProgress) return 2;
    if (awaitReady(comm) != ncclSuccess) return 3;
    std::vector<float> v(100000, static_cast<float>(rank + 1));
    cudaStream_t s;
    cudaStreamCreate(&s);
    ncclResult_t r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, s);
    if (r != ncclInProgress && r != ncclSuccess) return 4;
    if (awaitReady(comm) != ncclSuccess) return 5;
    cudaStreamSynchronize(s);
    if (v[0] != 3.0f || v.back() != 3.0f) return 6;
    // A group of two: in progress as a whole, then both done.
    ncclGroupStart();
    ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, s);
    ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, s);
    r = ncclGroupEnd();
    if (r != ncclInProgress && r != ncclSuccess) return 7;
    if (awaitReady(comm) != ncclSuccess) return 8;
    cudaStreamSynchronize(s);
    if (v[0] != 12.0f) return 9;
    r = ncclCommFinalize(comm);
    if (r != ncclInProgress && r != ncclSuccess) return 10;
    if (awaitReady(comm) != ncclSuccess) return 11;
    if (ncclCommDestroy(comm) != ncclSuccess) return 12;
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("ANonBlockingCommunicatorUsedBeforeItIsReadyIsRefused") {
  const int n = 2;
  testing::MultiRankJob job(n);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    if (r != ncclInProgress) return 1;
    if (awaitReady(comm) != ncclSuccess) return 2;
    // Rank 0 issues its second AllReduce without waiting: either the first is still in
    // progress (refused, with NCCL's message; issued again once ready) or already done.
    std::vector<float> v(1 << 20, 1.0f);
    r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (r != ncclInProgress && r != ncclSuccess) return 3;
    if (rank != 0 && awaitReady(comm) != ncclSuccess) return 4;
    ncclResult_t again = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (again == ncclInvalidArgument) {
      if (std::string(ncclGetLastError(comm)).find("Attempt to use communicator") == std::string::npos) return 5;
      if (awaitReady(comm) != ncclSuccess) return 6;
      again = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    if (again != ncclInProgress && again != ncclSuccess) return 8;
    if (awaitReady(comm) != ncclSuccess) return 7;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait(std::chrono::seconds(30))));
}
