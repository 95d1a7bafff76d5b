#pragma once
// Per-thread-default-stream builds (nvcc --default-stream per-thread) call the _ptsz /
// _ptds entry points: there, stream 0 names the calling thread's per-thread stream;
// cudaStreamLegacy still names the legacy stream.
#include <cuda_runtime_api.h>

namespace simgpu {

inline cudaStream_t perThreadDefault(cudaStream_t stream) {
  return stream == nullptr ? cudaStreamPerThread : stream;
}

}  // namespace simgpu
