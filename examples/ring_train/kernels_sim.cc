// simgpu kernels: host functions run on the stream's worker thread.
#include "hangwatch/simgpu/kernel.h"

#include "kernels.h"

namespace {

void fill_pattern(float* buf, size_t count, int pattern, int rank, int step, size_t first) {
  for (size_t i = 0; i < count; ++i) buf[i] = patternValue(static_cast<Pattern>(pattern), rank, step, first + i);
}

void init_weights(void* weights, size_t count, int dtype, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1u;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    const float value = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.02f;
    if (static_cast<DType>(dtype) == DType::F32) {
      static_cast<float*>(weights)[i] = value;
    } else {
      static_cast<_Float16*>(weights)[i] = static_cast<_Float16>(value);
    }
  }
}

void sgd_update(float* master, const float* grads, size_t count, float lr) {
  for (size_t i = 0; i < count; ++i) master[i] -= lr * grads[i];
}

const dim3 kOneBlock{1, 1, 1};

}  // namespace

cudaError_t launchFillPattern(float* buf, size_t count, Pattern pattern, int rank, int step, size_t first,
                              cudaStream_t stream) {
  int pattern_id = static_cast<int>(pattern);
  void* args[] = {&buf, &count, &pattern_id, &rank, &step, &first};
  return cudaLaunchKernel(simgpu::kernel<&fill_pattern>("fill_pattern"), kOneBlock, kOneBlock, args, 0, stream);
}

cudaError_t launchInitWeights(void* weights, size_t count, DType dtype, uint32_t seed, cudaStream_t stream) {
  int dtype_id = static_cast<int>(dtype);
  void* args[] = {&weights, &count, &dtype_id, &seed};
  return cudaLaunchKernel(simgpu::kernel<&init_weights>("init_weights"), kOneBlock, kOneBlock, args, 0, stream);
}

cudaError_t launchSgdUpdate(float* master, const float* grads, size_t count, float lr, cudaStream_t stream) {
  void* args[] = {&master, &grads, &count, &lr};
  return cudaLaunchKernel(simgpu::kernel<&sgd_update>("sgd_update"), kOneBlock, kOneBlock, args, 0, stream);
}
