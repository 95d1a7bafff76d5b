// CUDA kernels of the training examples (real-GPU build, HANGWATCH_REAL_CUDA=ON).
#include <cuda_fp16.h>

#include "kernels.h"

namespace {

constexpr unsigned kThreads = 256;

unsigned blocksFor(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

__global__ void fill_pattern(float* buf, size_t count, int pattern, int rank, int step, size_t first) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    buf[i] = patternValue(static_cast<Pattern>(pattern), rank, step, first + i);
}

__global__ void init_weights(void* weights, size_t count, int dtype, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t state = (seed * 2654435761u + 1u) ^ static_cast<uint32_t>(i * 2246822519u);
    state = state * 1664525u + 1013904223u;
    const float value = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.02f;
    if (dtype == static_cast<int>(DType::F32))
      static_cast<float*>(weights)[i] = value;
    else
      static_cast<__half*>(weights)[i] = __float2half(value);
  }
}

__global__ void sgd_update(float* master, const float* grads, size_t count, float lr) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    master[i] -= lr * grads[i];
}

}  // namespace

cudaError_t launchFillPattern(float* buf, size_t count, Pattern pattern, int rank, int step, size_t first,
                              cudaStream_t stream) {
  fill_pattern<<<blocksFor(count), kThreads, 0, stream>>>(buf, count, static_cast<int>(pattern), rank, step, first);
  return cudaGetLastError();
}

cudaError_t launchInitWeights(void* weights, size_t count, DType dtype, uint32_t seed, cudaStream_t stream) {
  init_weights<<<blocksFor(count), kThreads, 0, stream>>>(weights, count, static_cast<int>(dtype), seed);
  return cudaGetLastError();
}

cudaError_t launchSgdUpdate(float* master, const float* grads, size_t count, float lr, cudaStream_t stream) {
  sgd_update<<<blocksFor(count), kThreads, 0, stream>>>(master, grads, count, lr);
  return cudaGetLastError();
}
