// Every collective, across rank counts, types and reduction ops, checked against
// the values computed on the host. Each rank is its own process.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "multi_rank.h"

namespace {

// Small integers so sums and products stay exact in every type, half included.
double valueFor(int rank, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return 1.0 + static_cast<double>((rank + i) % 2);
  return static_cast<double>(static_cast<int>((i * 7 + rank * 3) % 13) - 4);
}

uint16_t toHalf(float f) {  // exact for the small integers used here
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = (x >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (exp << 10) | man);
}

float fromHalf(uint16_t h) {
  if ((h & 0x7fff) == 0) return (h & 0x8000) ? -0.0f : 0.0f;
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = ((h >> 10) & 0x1f) - 15 + 127;
  uint32_t man = (h & 0x3ff) << 13;
  uint32_t bits = sign | exp << 23 | man;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

size_t sizeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

void store(void* buf, size_t i, ncclDataType_t t, double v) {
  switch (t) {
    case ncclInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case ncclInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case ncclInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case ncclFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case ncclFloat64: static_cast<double*>(buf)[i] = v; break;
    case ncclFloat16: static_cast<uint16_t*>(buf)[i] = toHalf(static_cast<float>(v)); break;
    case ncclBfloat16: {
      float f = static_cast<float>(v);
      uint32_t x;
      std::memcpy(&x, &f, 4);
      static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(x >> 16);
      break;
    }
    default: break;
  }
}

double load(const void* buf, size_t i, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return static_cast<const int8_t*>(buf)[i];
    case ncclInt32: return static_cast<const int32_t*>(buf)[i];
    case ncclInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case ncclFloat32: return static_cast<const float*>(buf)[i];
    case ncclFloat64: return static_cast<const double*>(buf)[i];
    case ncclFloat16: return fromHalf(static_cast<const uint16_t*>(buf)[i]);
    case ncclBfloat16: {
      uint32_t x = static_cast<uint32_t>(static_cast<const uint16_t*>(buf)[i]) << 16;
      float f;
      std::memcpy(&f, &x, 4);
      return f;
    }
    default: return 0;
  }
}

double combine(double a, double b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return a + b;
  }
}

double expectedReduction(int nranks, size_t i, ncclRedOp_t op, ncclDataType_t t) {
  double acc = valueFor(0, i, op);
  for (int r = 1; r < nranks; ++r) acc = combine(acc, valueFor(r, i, op), op);
  if (op == ncclAvg) {
    acc /= nranks;
    if (t == ncclInt8 || t == ncclInt32 || t == ncclInt64) acc = std::trunc(acc);
  }
  return acc;
}

bool closeEnough(double got, double want, ncclDataType_t t) {
  double tol = (t == ncclFloat16 || t == ncclBfloat16) ? 0.02 * std::max(1.0, std::fabs(want)) : 1e-6;
  return std::fabs(got - want) <= tol;
}

struct Case {
  ncclDataType_t dtype;
  ncclRedOp_t op;
  size_t count;
};

// Runs AllReduce, AllGather, ReduceScatter, Broadcast and Reduce (every root) on
// one rank and checks each result; returns the number of wrong elements.
int collectivesOnRank(int rank, int nranks, const ncclUniqueId& id, const Case& c) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  size_t es = sizeOf(c.dtype);
  size_t n = c.count;
  std::vector<char> send(es * n * nranks), recv(es * n * nranks);
  int wrong = 0;
  auto report = [&](const char* what, size_t i, double got, double want) {
    if (wrong++ < 3)
      std::fprintf(stderr, "rank %d %s dtype %d op %d count %zu: [%zu] = %g, want %g\n", rank, what, c.dtype, c.op,
                   n, i, got, want);
  };

  for (size_t i = 0; i < n; ++i) store(send.data(), i, c.dtype, valueFor(rank, i, c.op));
  ncclAllReduce(send.data(), recv.data(), n, c.dtype, c.op, comm, stream);
  cudaStreamSynchronize(stream);
  for (size_t i = 0; i < n; ++i) {
    double want = expectedReduction(nranks, i, c.op, c.dtype);
    if (!closeEnough(load(recv.data(), i, c.dtype), want, c.dtype)) report("AllReduce", i, load(recv.data(), i, c.dtype), want);
  }

  // In place, as PyTorch does for gradients.
  for (size_t i = 0; i < n; ++i) store(recv.data(), i, c.dtype, valueFor(rank, i, c.op));
  ncclAllReduce(recv.data(), recv.data(), n, c.dtype, c.op, comm, stream);
  cudaStreamSynchronize(stream);
  for (size_t i = 0; i < n; ++i) {
    double want = expectedReduction(nranks, i, c.op, c.dtype);
    if (!closeEnough(load(recv.data(), i, c.dtype), want, c.dtype)) report("AllReduce in place", i, load(recv.data(), i, c.dtype), want);
  }

  for (size_t i = 0; i < n; ++i) store(send.data(), i, c.dtype, valueFor(rank, i, ncclSum));
  ncclAllGather(send.data(), recv.data(), n, c.dtype, comm, stream);
  cudaStreamSynchronize(stream);
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < n; ++i) {
      double want = valueFor(r, i, ncclSum);
      if (load(recv.data(), r * n + i, c.dtype) != want) report("AllGather", r * n + i, load(recv.data(), r * n + i, c.dtype), want);
    }

  // ReduceScatter: block b of every rank's input reduces into rank b's output.
  for (int b = 0; b < nranks; ++b)
    for (size_t i = 0; i < n; ++i) store(send.data(), b * n + i, c.dtype, valueFor(rank, b * n + i, c.op));
  ncclReduceScatter(send.data(), recv.data(), n, c.dtype, c.op, comm, stream);
  cudaStreamSynchronize(stream);
  for (size_t i = 0; i < n; ++i) {
    double want = expectedReduction(nranks, rank * n + i, c.op, c.dtype);
    if (!closeEnough(load(recv.data(), i, c.dtype), want, c.dtype)) report("ReduceScatter", i, load(recv.data(), i, c.dtype), want);
  }

  for (int root = 0; root < nranks; ++root) {
    for (size_t i = 0; i < n; ++i) store(send.data(), i, c.dtype, valueFor(rank + 10 * root, i, ncclSum));
    std::memset(recv.data(), 0, es * n);
    ncclBroadcast(send.data(), recv.data(), n, c.dtype, root, comm, stream);
    cudaStreamSynchronize(stream);
    for (size_t i = 0; i < n; ++i) {
      double want = valueFor(root + 10 * root, i, ncclSum);
      if (load(recv.data(), i, c.dtype) != want) report("Broadcast", i, load(recv.data(), i, c.dtype), want);
    }

    for (size_t i = 0; i < n; ++i) store(send.data(), i, c.dtype, valueFor(rank, i, c.op));
    std::memset(recv.data(), 0, es * n);
    ncclReduce(send.data(), recv.data(), n, c.dtype, c.op, root, comm, stream);
    cudaStreamSynchronize(stream);
    if (rank == root)
      for (size_t i = 0; i < n; ++i) {
        double want = expectedReduction(nranks, i, c.op, c.dtype);
        if (!closeEnough(load(recv.data(), i, c.dtype), want, c.dtype)) report("Reduce", i, load(recv.data(), i, c.dtype), want);
      }
  }
  ncclCommDestroy(comm);
  cudaStreamDestroy(stream);
  return wrong == 0 ? 0 : 1;
}

void runCases(int nranks, const std::vector<Case>& cases, const std::map<std::string, std::string>& env = {}) {
  for (const Case& c : cases) {
    testing::MultiRankJob job(nranks);
    ncclUniqueId id = job.id();
    job.start([&](int rank) { return collectivesOnRank(rank, nranks, id, c); }, env);
    auto res = job.wait(std::chrono::seconds(90));
    INFO("nranks " << nranks << " dtype " << c.dtype << " op " << c.op << " count " << c.count);
    CHECK_FALSE(res.timed_out);
    CHECK(testing::allZero(res));
  }
}

// Slot is 64 KiB: counts below, at and well above one step, with uneven tails.
const std::vector<Case> kFloatCases = {
    {ncclFloat32, ncclSum, 1},       {ncclFloat32, ncclSum, 1000},   {ncclFloat32, ncclSum, 300001},
    {ncclFloat32, ncclMax, 70000},   {ncclFloat32, ncclMin, 70000},  {ncclFloat32, ncclProd, 5000},
    {ncclFloat32, ncclAvg, 40000},   {ncclFloat16, ncclSum, 100003}, {ncclBfloat16, ncclMax, 50000},
    {ncclFloat64, ncclSum, 40000},
};
const std::vector<Case> kIntCases = {
    {ncclInt32, ncclSum, 200000}, {ncclInt32, ncclMin, 999}, {ncclInt64, ncclMax, 33333},
    {ncclInt8, ncclSum, 100000},  {ncclInt32, ncclAvg, 4096},
};

}  // namespace

TEST_CASE("CollectivesAreCorrectOnTwoRanks") {
  runCases(2, kFloatCases);
  runCases(2, kIntCases);
}

TEST_CASE("CollectivesAreCorrectOnThreeRanks") { runCases(3, kFloatCases); }

TEST_CASE("CollectivesAreCorrectOnFourRanks") {
  runCases(4, kFloatCases);
  runCases(4, kIntCases);
}

TEST_CASE("CollectivesAreCorrectOnEightRanks") {
  runCases(8, {{ncclFloat32, ncclSum, 300001}, {ncclFloat16, ncclSum, 20000}, {ncclInt32, ncclMax, 7777}});
}

// NCCL's tree AllReduce (algorithm.h): a chain inside each node, a double binary tree over
// the nodes, on every shape; the other collectives stay on the ring.
TEST_CASE("TreeAllReduceIsCorrectInsideANodeAndAcrossNodes") {
  for (const char* per_node : {"", "1", "2", "3"}) {
    std::map<std::string, std::string> env = {
        {"NCCL_ALGO", "allreduce:tree"}, {"SIMGPU_RANKS_PER_NODE", per_node}, {"SIMGPU_HOSTID", ""},
        {"RANK", ""}, {"OMPI_COMM_WORLD_RANK", ""}, {"SLURM_PROCID", ""}, {"PMI_RANK", ""}};
    INFO("SIMGPU_RANKS_PER_NODE=" << per_node);
    runCases(5, {{ncclFloat32, ncclSum, 300001}, {ncclFloat32, ncclAvg, 40000}, {ncclInt32, ncclMax, 7777}}, env);
    runCases(8, {{ncclFloat32, ncclSum, 70000}, {ncclFloat64, ncclProd, 5000}}, env);
    runCases(2, {{ncclFloat16, ncclSum, 100003}}, env);
  }
}

// PAT's AllGather and ReduceScatter (algorithm.h) with every rank alone on its node, at rank
// counts that are and are not powers of two; the other collectives keep their algorithms.
TEST_CASE("PatAllGatherAndReduceScatterAreCorrectWithOneRankPerNode") {
  std::map<std::string, std::string> env = {
      {"NCCL_ALGO", "allgather:pat;reducescatter:pat"}, {"SIMGPU_RANKS_PER_NODE", "1"}, {"SIMGPU_HOSTID", ""},
      {"RANK", ""}, {"OMPI_COMM_WORLD_RANK", ""}, {"SLURM_PROCID", ""}, {"PMI_RANK", ""}};
  for (int n : {2, 3, 5, 8}) {
    INFO(n << " ranks");
    runCases(n, {{ncclFloat32, ncclSum, 300001}, {ncclInt32, ncclMax, 7777}, {ncclFloat16, ncclSum, 1}}, env);
  }
  runCases(4, {{ncclFloat64, ncclProd, 5000}, {ncclInt8, ncclSum, 100000}}, env);
}

TEST_CASE("SingleRankCommunicatorCopies") { runCases(1, {{ncclFloat32, ncclSum, 1000}, {ncclInt32, ncclAvg, 77}}); }

TEST_CASE("ManyBackToBackCollectivesKeepStepCountersInSync") {
  const int nranks = 3;
  testing::MultiRankJob job(nranks);
  ncclUniqueId id = job.id();
  job.start([&](int rank) {
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 100;
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    const size_t kMax = 50000;
    std::vector<std::vector<int32_t>> bufs(10, std::vector<int32_t>(kMax));
    int wrong = 0;
    // Ten launches between synchronizations: consecutive collectives share the
    // connections, so their step counters must line up across ranks.
    for (int iter = 0; iter < 200; ++iter) {
      std::vector<int32_t>& buf = bufs[iter % 10];
      size_t count = 1 + (iter * 7919) % kMax;
      for (size_t i = 0; i < count; ++i) buf[i] = rank + iter;
      ncclAllReduce(buf.data(), buf.data(), count, ncclInt32, ncclSum, comm, stream);
      if (iter % 10 != 9) continue;
      cudaStreamSynchronize(stream);
      for (int back = iter - 9; back <= iter; ++back) {
        size_t c = 1 + (back * 7919) % kMax;
        int32_t want = 3 * back + 3;
        if (bufs[back % 10][c - 1] != want && wrong++ < 3)
          std::fprintf(stderr, "iter %d: %d want %d\n", back, bufs[back % 10][c - 1], want);
      }
    }
    ncclCommDestroy(comm);
    return wrong == 0 ? 0 : 1;
  });
  CHECK(testing::allZero(job.wait(std::chrono::seconds(120))));
}
