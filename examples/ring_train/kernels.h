#pragma once
// Device work of the training examples, one launch function per kernel. The sim
// build runs them on the simgpu stream thread (kernels_sim.cc), the real build as
// CUDA kernels (kernels.cu); callers see the same API either way.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "patterns.h"

enum class DType : int { F32 = 0, F16 = 1 };

inline size_t dtypeBytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

// buf[i] = patternValue(pattern, rank, step, first + i) for i < count.
cudaError_t launchFillPattern(float* buf, size_t count, Pattern pattern, int rank, int step, size_t first,
                              cudaStream_t stream);

// Small pseudo-random weights in `dtype`, reproducible from `seed`.
cudaError_t launchInitWeights(void* weights, size_t count, DType dtype, uint32_t seed, cudaStream_t stream);

// Plain SGD on fp32 master weights: master[i] -= lr * grads[i].
cudaError_t launchSgdUpdate(float* master, const float* grads, size_t count, float lr, cudaStream_t stream);
