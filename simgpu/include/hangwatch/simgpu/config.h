#pragma once
// Knobs of the emulated machine, read once from the environment. They shape time
// (so FLOPS and bandwidth measured from outside are meaningful), not behaviour.
#include <cstddef>
#include <cstdint>

namespace simgpu {

struct SimConfig {
  int device_count = 8;            // SIMGPU_DEVICE_COUNT
  double tflops = 1.0;             // SIMGPU_TFLOPS: GEMM throughput of a healthy device
  double copy_gbps = 10.0;         // SIMGPU_COPY_GBPS: memcpy/memset throughput
  double link_gbps = 4.0;          // SIMGPU_LINK_GBPS: one ring connection, one channel
  int nchannels = 2;               // SIMGPU_NCHANNELS: ring channels ("blocks") per collective
  size_t slot_bytes = 64 * 1024;   // SIMGPU_SLOT_BYTES: bytes per step (one of 8 in-flight slots)
  // SIMGPU_LAUNCH_QUEUE_DEPTH: operations a stream holds that have not finished; a launch
  // onto a full stream waits, as a launch onto a GPU whose queue is full does. 0: no bound.
  size_t launch_queue_depth = 1024;
  uint64_t gemm_compute_limit = uint64_t{1} << 24;  // SIMGPU_GEMM_COMPUTE_LIMIT: m*n*k above this is timed, not computed
};

// Parsed on first use; a malformed value is reported once on stderr and the default kept.
const SimConfig& simConfig();

// An NCCL_* integer parameter as NCCL's own NCCL_PARAM reads it (strtoll, any base), or fallback.
int64_t ncclParam(const char* name, int64_t fallback);

}  // namespace simgpu
