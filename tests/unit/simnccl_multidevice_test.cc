// NCCL programs that drive several devices of one process, as NCCL's documentation
// teaches them: one thread and one group for every device, communicators made in a
// group, groups that mix collectives and p2p over communicators of different sizes, and
// one device per thread. Real NCCL completes each of them; so must simnccl.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "multi_rank.h"

namespace {

constexpr int kDevices = 4;
constexpr size_t kCount = 4096;

std::vector<float*> deviceBuffers(float value_base) {
  std::vector<float*> bufs(kDevices);
  for (int d = 0; d < kDevices; ++d) {
    cudaSetDevice(d);
    cudaMalloc(reinterpret_cast<void**>(&bufs[d]), kCount * sizeof(float));
    for (size_t i = 0; i < kCount; ++i) bufs[d][i] = value_base + static_cast<float>(d);
  }
  cudaSetDevice(0);
  return bufs;
}

}  // namespace

TEST_CASE("OneThreadRingExchangeOverEveryDeviceCompletesOnEachDevicesStreamZero") {
  testing::MultiRankJob job(1);
  job.start([](int) {
    ncclComm_t comms[kDevices];
    if (ncclCommInitAll(comms, kDevices, nullptr) != ncclSuccess) return 1;
    std::vector<float*> send = deviceBuffers(0), recv = deviceBuffers(100);
    // Stream 0 in NCCL means the communicator's device's default stream, whatever device
    // the calling thread has current (device 0 here).
    if (ncclGroupStart() != ncclSuccess) return 2;
    for (int d = 0; d < kDevices; ++d) {
      ncclSend(send[d], kCount, ncclFloat32, (d + 1) % kDevices, comms[d], nullptr);
      ncclRecv(recv[d], kCount, ncclFloat32, (d + kDevices - 1) % kDevices, comms[d], nullptr);
    }
    if (ncclGroupEnd() != ncclSuccess) return 3;
    for (int d = 0; d < kDevices; ++d) {
      cudaSetDevice(d);
      cudaDeviceSynchronize();
      if (recv[d][0] != static_cast<float>((d + kDevices - 1) % kDevices) || recv[d][kCount - 1] != recv[d][0])
        return 10 + d;
      ncclCommDestroy(comms[d]);
    }
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("OneGroupMixesCollectivesAndP2pOverCommunicatorsOfDifferentSizes") {
  testing::MultiRankJob job(1);
  job.start([](int) {
    ncclComm_t world[kDevices];
    if (ncclCommInitAll(world, kDevices, nullptr) != ncclSuccess) return 1;
    // Pairs {0,1} and {2,3}, made with ncclCommInitRank for several devices in one group.
    ncclUniqueId pair_id[2];
    ncclGetUniqueId(&pair_id[0]);
    ncclGetUniqueId(&pair_id[1]);
    ncclComm_t pair[kDevices];
    if (ncclGroupStart() != ncclSuccess) return 2;
    for (int d = 0; d < kDevices; ++d) {
      cudaSetDevice(d);
      if (ncclCommInitRank(&pair[d], 2, pair_id[d / 2], d % 2) != ncclSuccess) return 3;
    }
    if (ncclGroupEnd() != ncclSuccess) return 4;
    std::vector<cudaStream_t> streams(kDevices);
    for (int d = 0; d < kDevices; ++d) {
      cudaSetDevice(d);
      cudaStreamCreate(&streams[d]);
    }
    cudaSetDevice(0);
    std::vector<float*> reduce = deviceBuffers(1), send = deviceBuffers(10), recv = deviceBuffers(-1);
    if (ncclGroupStart() != ncclSuccess) return 5;
    for (int d = kDevices - 1; d >= 0; --d) {
      const int partner = d ^ 1;
      // Any order inside the group: the receive before the send on odd devices.
      if (d % 2) ncclRecv(recv[d], kCount, ncclFloat32, partner % 2, pair[d], streams[d]);
      ncclAllReduce(reduce[d], reduce[d], kCount, ncclFloat32, ncclSum, world[d], streams[d]);
      ncclSend(send[d], kCount, ncclFloat32, partner % 2, pair[d], streams[d]);
      if (d % 2 == 0) ncclRecv(recv[d], kCount, ncclFloat32, partner % 2, pair[d], streams[d]);
    }
    if (ncclGroupEnd() != ncclSuccess) return 6;
    for (int d = 0; d < kDevices; ++d) {
      cudaSetDevice(d);
      cudaStreamSynchronize(streams[d]);
      if (reduce[d][0] != 1 + 2 + 3 + 4) return 20 + d;
      if (recv[d][kCount - 1] != 10.0f + static_cast<float>(d ^ 1)) return 30 + d;
      ncclCommDestroy(pair[d]);
      ncclCommDestroy(world[d]);
    }
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}

TEST_CASE("OneDevicePerThreadEachThreadItsOwnRank") {
  testing::MultiRankJob job(1);
  job.start([](int) {
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    std::vector<int> results(kDevices, -1);
    std::vector<std::thread> threads;
    for (int d = 0; d < kDevices; ++d)
      threads.emplace_back([d, id, &results] {
        cudaSetDevice(d);
        ncclComm_t comm;
        if (ncclCommInitRank(&comm, kDevices, id, d) != ncclSuccess) return;
        std::vector<float> buf(kCount, static_cast<float>(d));
        cudaStream_t stream;
        cudaStreamCreate(&stream);
        ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, stream);
        cudaStreamSynchronize(stream);
        results[d] = buf[kCount - 1] == 0 + 1 + 2 + 3 ? 0 : 1;
        ncclCommDestroy(comm);
      });
    for (auto& t : threads) t.join();
    for (int r : results)
      if (r != 0) return 1;
    return 0;
  });
  CHECK(testing::allZero(job.wait()));
}
