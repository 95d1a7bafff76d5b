#pragma once
// Deterministic buffer contents the collectives are checked against. Every value is
// a small integer, so sums over any number of ranks are exact in fp32 and a checker
// can compare with == instead of a tolerance. Values repeat every 17 elements.
#include <cstddef>

#ifdef __CUDACC__
#define TRAIN_HOST_DEVICE __host__ __device__
#else
#define TRAIN_HOST_DEVICE
#endif

enum class Pattern : int {
  Gradient = 0,   // gradient bucket fed to the data-parallel AllReduce
  TpShard = 1,    // one rank's shard of the tensor-parallel AllGather
  TpPartial = 2,  // one rank's partial sums fed to the tensor-parallel ReduceScatter
  Activation = 3,  // a pipeline stage's output for one micro-batch, sent to the next stage
  ActGrad = 4,     // its input gradient for one micro-batch, sent to the previous stage
  TpBlock = 5,     // a block's output fed to the tensor-parallel AllReduce
};

TRAIN_HOST_DEVICE inline float patternValue(Pattern pattern, int rank, int step, size_t index) {
  const size_t mix = index * 7u + static_cast<size_t>(rank) * 13u + static_cast<size_t>(step) * 5u +
                     static_cast<size_t>(pattern) * 3u;
  return static_cast<float>(static_cast<int>(mix % 17u) - 8);
}
