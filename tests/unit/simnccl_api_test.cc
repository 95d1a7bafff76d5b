// Groups, point-to-point, communicator creation variants and argument errors.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "multi_rank.h"

TEST_CASE("GroupedSendRecvAroundTheRingDoesNotDeadlock") {
  // Each rank sends 4 MiB to next and receives from prev: far more than the 8
  // in-flight slots, so only concurrent execution of the group can finish.
  const int nranks = 4;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
    const size_t n = 1 << 20;
    std::vector<float> out(n, static_cast<float>(rank)), in(n, -1.0f);
    ncclGroupStart();
    ncclSend(out.data(), n, ncclFloat32, (rank + 1) % nranks, comm, nullptr);
    ncclRecv(in.data(), n, ncclFloat32, (rank + nranks - 1) % nranks, comm, nullptr);
    if (ncclGroupEnd() != ncclSuccess) return 2;
    cudaDeviceSynchronize();
    for (size_t i = 0; i < n; ++i)
      if (in[i] != static_cast<float>((rank + nranks - 1) % nranks)) return 3;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("SendRecvToSelfAndAllToAllInOneGroup") {
  const int nranks = 3;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
    const size_t n = 100000;
    std::vector<std::vector<int32_t>> out(nranks), in(nranks);
    ncclGroupStart();
    for (int p = 0; p < nranks; ++p) {
      out[p].assign(n, rank * 100 + p);
      in[p].assign(n, -1);
      ncclSend(out[p].data(), n, ncclInt32, p, comm, nullptr);
      ncclRecv(in[p].data(), n, ncclInt32, p, comm, nullptr);
    }
    if (ncclGroupEnd() != ncclSuccess) return 2;
    cudaDeviceSynchronize();
    for (int p = 0; p < nranks; ++p)
      for (size_t i = 0; i < n; i += 997)
        if (in[p][i] != p * 100 + rank) return 3;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("GroupedCollectivesOnSeveralStreamsComplete") {
  const int nranks = 2;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
    cudaStream_t s1, s2;
    cudaStreamCreate(&s1);
    cudaStreamCreate(&s2);
    std::vector<float> a(50000, 1.0f), b(70000, 2.0f), c(10, 3.0f);
    ncclGroupStart();
    ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, s1);
    ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, s1);
    ncclAllReduce(c.data(), c.data(), c.size(), ncclFloat32, ncclMax, comm, s2);
    if (ncclGroupEnd() != ncclSuccess) return 2;
    cudaStreamSynchronize(s1);
    cudaStreamSynchronize(s2);
    if (a[49999] != 2.0f || b[0] != 4.0f || c[3] != 3.0f) return 3;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("CommInitAllDrivesSeveralDevicesFromOneThread") {
  testing::MultiRankJob job(1);
  job.start([](int) {
    const int ndev = 4;
    ncclComm_t comms[ndev];
    if (ncclCommInitAll(comms, ndev, nullptr) != ncclSuccess) return 1;
    std::vector<std::vector<float>> bufs(ndev, std::vector<float>(123457));
    std::vector<cudaStream_t> streams(ndev);
    for (int d = 0; d < ndev; ++d) {
      cudaSetDevice(d);
      cudaStreamCreate(&streams[d]);
      int dev = -1, rank = -1, count = -1;
      ncclCommCuDevice(comms[d], &dev);
      ncclCommUserRank(comms[d], &rank);
      ncclCommCount(comms[d], &count);
      if (dev != d || rank != d || count != ndev) return 2;
      for (auto& x : bufs[d]) x = static_cast<float>(d + 1);
    }
    ncclGroupStart();
    for (int d = 0; d < ndev; ++d)
      ncclAllReduce(bufs[d].data(), bufs[d].data(), bufs[d].size(), ncclFloat32, ncclSum, comms[d], streams[d]);
    if (ncclGroupEnd() != ncclSuccess) return 3;
    for (int d = 0; d < ndev; ++d) {
      cudaStreamSynchronize(streams[d]);
      if (bufs[d][0] != 10.0f || bufs[d].back() != 10.0f) return 4;
      ncclCommDestroy(comms[d]);
    }
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("CommSplitFormsSubCommunicatorsByColorAndKey") {
  const int nranks = 4;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t world, half, none;
    if (ncclCommInitRank(&world, nranks, id, rank) != ncclSuccess) return 100;
    // Reverse order inside each color through the key.
    if (ncclCommSplit(world, rank % 2, -rank, &half, nullptr) != ncclSuccess) return 1;
    int r = -1, n = -1;
    ncclCommUserRank(half, &r);
    ncclCommCount(half, &n);
    if (n != 2 || r != (rank < 2 ? 1 : 0)) return 2;
    std::vector<int32_t> v(1000, rank);
    ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, half, nullptr);
    cudaDeviceSynchronize();
    if (v[999] != (rank % 2 == 0 ? 0 + 2 : 1 + 3)) return 3;
    if (ncclCommSplit(world, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr) != ncclSuccess || none != nullptr) return 4;
    ncclCommDestroy(half);
    ncclCommDestroy(world);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("InvalidArgumentsReturnNcclErrorCodes") {
  testing::MultiRankJob job(1);
  ncclUniqueId id = job.id();
  job.start([&](int) {
    ncclComm_t comm = nullptr;
    ncclUniqueId garbage;
    std::memset(&garbage, 7, sizeof(garbage));
    if (ncclCommInitRank(&comm, 1, garbage, 0) != ncclInvalidArgument) return 1;
    if (ncclCommInitRank(&comm, 2, id, 2) != ncclInvalidArgument) return 2;
    if (ncclCommInitRank(&comm, 0, id, 0) != ncclInvalidArgument) return 3;
    if (ncclCommInitRank(nullptr, 1, id, 0) != ncclInvalidArgument) return 4;
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 5;
    float x = 1;
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr) != ncclInvalidArgument) return 6;
    if (ncclAllReduce(&x, &x, 1, static_cast<ncclDataType_t>(99), ncclSum, comm, nullptr) != ncclInvalidArgument)
      return 7;
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, static_cast<ncclRedOp_t>(42), comm, nullptr) != ncclInvalidArgument)
      return 8;
    if (ncclAllReduce(nullptr, &x, 1, ncclFloat32, ncclSum, comm, nullptr) != ncclInvalidArgument) return 9;
    if (ncclBroadcast(&x, &x, 1, ncclFloat32, 1, comm, nullptr) != ncclInvalidArgument) return 10;
    if (ncclSend(&x, 1, ncclFloat32, 5, comm, nullptr) != ncclInvalidArgument) return 11;
    if (ncclGroupEnd() != ncclInvalidUsage) return 12;
    cudaStream_t bogus = reinterpret_cast<cudaStream_t>(0x1234);
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, bogus) != ncclUnhandledCudaError) return 13;
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 14;
    if (std::strlen(ncclGetErrorString(ncclInvalidArgument)) == 0) return 15;
    ncclResult_t async = ncclInternalError;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess) return 16;
    ncclCommDestroy(comm);
    return 0;
  });
  auto res = job.wait();
  INFO("child exit code (step that failed): " << res.exit_codes[0]);
  CHECK(testing::allZero(res));
}

TEST_CASE("GroupSimulateEndRunsNothingEstimatesATimeAndEndsTheGroup") {
  // Two ranks: a simulated AllReduce must neither run nor count, so the real one after it
  // pairs up with the other rank's first (and only) AllReduce.
  const int nranks = 2;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
    std::vector<float> buf(1 << 16, 1.0f);
    if (rank == 0) {
      ncclGroupStart();
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      if (ncclGroupSimulateEnd(&sim) != ncclSuccess) return 2;
      if (!(sim.estimatedTime > 0.0f)) return 3;
      cudaDeviceSynchronize();
      if (buf[0] != 1.0f) return 4;  // nothing ran
      ncclSimInfo_t garbage{};
      ncclGroupStart();
      if (ncclGroupSimulateEnd(&garbage) != ncclInvalidArgument) return 5;
      if (ncclGroupSimulateEnd(nullptr) != ncclInvalidUsage) return 6;  // no group is open any more
    }
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) return 7;
    cudaDeviceSynchronize();
    if (buf[0] != 2.0f) return 8;
    ncclCommDestroy(comm);
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

namespace simnccl {
uint64_t communicatorId(const char* segment_name);  // profiler_hooks.h
}

// NCCL's own id of a communicator (what a profiler plugin's init gets as commId): the
// gdb scripts compute the same from the segment name they read out of the process
// (gdb-scripts/tests/test_parsers.py pins the same value), so debugger records join.
TEST_CASE("CommunicatorIdIsFnv1aOfTheSegmentNameAsTheGdbScriptsComputeIt") {
  CHECK(simnccl::communicatorId("/simnccl-1-0-ab") == 0x1852e9190e780d2aull);
}

TEST_CASE("AnIdWhoseMakerIsGoneIsRefusedAfterNcclsConnectRetries") {
  // A worker that reads the last attempt's id from a store its launcher kept (torchrun's shared
  // TCPStore across restarts: pytorch#135712) connects to a bootstrap root that died with that
  // attempt. NCCL retries the refused connect NCCL_SOCKET_RETRY_CNT times, sleeping n x
  // NCCL_SOCKET_RETRY_SLEEP_MSEC before the n-th, then fails with ncclRemoteError.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t maker = fork();
  if (maker == 0) {
    ncclUniqueId made;
    ncclGetUniqueId(&made);
    _exit(write(fds[1], &made, sizeof(made)) == sizeof(made) ? 0 : 1);
  }
  ncclUniqueId stale;
  REQUIRE(read(fds[0], &stale, sizeof(stale)) == sizeof(stale));
  close(fds[0]);
  close(fds[1]);
  int status = 0;
  REQUIRE(waitpid(maker, &status, 0) == maker);

  testing::MultiRankJob job(2);
  job.start(
      [&](int rank) {
        ncclComm_t comm = nullptr;
        const auto start = std::chrono::steady_clock::now();
        if (ncclCommInitRank(&comm, 2, stale, rank) != ncclRemoteError) return 1;
        if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20 + 40)) return 2;
        const std::string why = ncclGetLastError(nullptr);
        if (why.find("Connection refused") == std::string::npos) return 3;
        if (why.find("after 3 attempts") == std::string::npos) return 4;
        return comm == nullptr ? 0 : 5;
      },
      {{"NCCL_SOCKET_RETRY_CNT", "2"}, {"NCCL_SOCKET_RETRY_SLEEP_MSEC", "20"}});
  CHECK(testing::allZero(job.wait(std::chrono::seconds(20))));
}
