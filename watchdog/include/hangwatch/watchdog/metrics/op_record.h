#pragma once
// What the watchdog's poller knows about one intercepted operation once the GPU
// has finished it. The interposers fill the issue-side fields on the hot path (no
// allocation: names are static strings or interned), the poller adds the GPU side.
#include <cstddef>
#include <cstdint>

namespace hangwatch::watchdog {

enum class OpClass : uint8_t {
  kCollective,  // ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast, ncclReduce, ...
  kP2P,         // ncclSend / ncclRecv
  kGemm,        // cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemm_v2, cublasLtMatmul
  kKernel,      // any other cudaLaunchKernel (may be sampled)
  kMemcpy,      // cudaMemcpyAsync
  kGraph,       // cudaGraphLaunch: one replay of a captured graph, named by its first collective
};
inline constexpr size_t kOpClassCount = static_cast<size_t>(OpClass::kGraph) + 1;

struct CompletedOp {
  OpClass cls = OpClass::kKernel;
  const char* name = "";       // API name ("ncclAllReduce") or kernel name; lives for the process
  uint64_t stream = 0;         // cudaStream_t as an integer
  // Collectives and p2p.
  uint64_t comm_hash = 0;      // 0 when not a communication op
  int comm_size = 0;           // ranks in the communicator
  int comm_rank = -1;          // this rank's place in it (ring order), -1 when unknown
  int peer = -1;               // p2p peer
  uint64_t seq = 0;            // per-communicator collective sequence number
  uint64_t bytes = 0;          // payload per rank as nccl-tests counts it (count * sizeof(dtype))
  // GEMMs.
  int64_t m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;            // 2*m*n*k*batch
  // Times in nanoseconds on the host's CLOCK_MONOTONIC; GPU times are mapped onto it.
  int64_t host_issue_ns = 0;   // when the interposer was called
  int64_t gpu_start_ns = 0;    // when the start event completed
  int64_t gpu_end_ns = 0;      // when the end event completed
};

// Host time spent blocked in a synchronizing CUDA call (cudaStreamSynchronize,
// cudaDeviceSynchronize, cudaEventSynchronize; cudaStreamWaitEvent counts with 0 ns).
struct HostSync {
  const char* call = "";
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

}  // namespace hangwatch::watchdog
