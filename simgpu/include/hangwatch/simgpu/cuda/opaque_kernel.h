#pragma once
// The model of an nvcc-compiled kernel simgpu cannot run or inspect (it does not read the
// cubin): 32 registers a thread, no static shared or local memory, on a 132-SM Hopper.
// Occupancy follows the CUDA occupancy rules for that footprint; a launch takes
// kLaunchOverhead plus kWaveTime per wave of blocks the GPU holds at once.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace simgpu::opaque_kernel {

constexpr int kMultiprocessors = 132;
constexpr int kRegistersPerThread = 32;
constexpr int kMaxThreadsPerSm = 2048;
constexpr int kMaxBlocksPerSm = 32;
constexpr int kRegistersPerSm = 65536;
constexpr size_t kSharedPerSm = 228 * 1024;
constexpr size_t kReservedSharedPerBlock = 1024;  // the runtime's per-block reservation on sm_90
constexpr size_t kMaxDynamicSharedPerBlock = 227 * 1024;
constexpr size_t kDefaultDynamicSharedPerBlock = 48 * 1024;
constexpr std::chrono::nanoseconds kLaunchOverhead{2000};
constexpr std::chrono::nanoseconds kWaveTime{1000};

// Blocks of `block_threads` threads with `dynamic_shared` bytes each that one SM holds.
inline int activeBlocksPerSm(int block_threads, size_t dynamic_shared) {
  if (block_threads <= 0) return 0;
  const int warps = (block_threads + 31) / 32;
  int blocks = std::min(kMaxBlocksPerSm, kMaxThreadsPerSm / (warps * 32));
  blocks = std::min(blocks, kRegistersPerSm / (warps * 32 * kRegistersPerThread));
  const size_t shared = dynamic_shared + kReservedSharedPerBlock;
  return std::min<int>(blocks, static_cast<int>(kSharedPerSm / shared));
}

inline std::chrono::nanoseconds launchTime(dim3 grid, dim3 block, size_t dynamic_shared) {
  const long long blocks = 1LL * grid.x * grid.y * grid.z;
  const int per_sm = std::max(1, activeBlocksPerSm(static_cast<int>(block.x * block.y * block.z), dynamic_shared));
  const long long wave = 1LL * kMultiprocessors * per_sm;
  return kLaunchOverhead + kWaveTime * ((blocks + wave - 1) / wave);
}

}  // namespace simgpu::opaque_kernel
